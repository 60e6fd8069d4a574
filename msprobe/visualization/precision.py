"""Precision index, colours, legend and tooltips of a compare graph, per dump mode (as 1.2.1 defines them).

* statistics (`task: summary`): max over the node's outputs of the Max/Min/Mean/Norm relative errors,
  capped at 1 (0 good, 1 bad).
* tensor (`task: all`): the drop of the One Thousandth Err Ratio from inputs to outputs,
  clamp(min over inputs - min over outputs, 0, 1); scalars do not count (0 good, 1 bad).
* md5: 1 when every input and output md5 equals the bench one, else 0 (1 good), plus `Result`.

An API collection takes the worst of its children; unmatched nodes get no index (grey).
"""
from typing import List, Optional

from msprobe.visualization import compare_bridge as bridge
from msprobe.visualization.graph_model import API_COLLECTION, Graph, Node

__all__ = ["TASK_OF_MODE", "compute_precision", "colors_for", "tooltips_for", "UNMATCHED_COLOR", "COLOR_BINS"]

TASK_OF_MODE = {bridge.MODE_STATISTICS: "summary", bridge.MODE_TENSOR: "all", bridge.MODE_MD5: "md5"}
UNMATCHED_COLOR = "#C7C7C7"
_SHADES = ("#FFFCF3", "#FFEDBE", "#FFDC7F", "#FFC62E", "#FF704D")
COLOR_BINS = {
    "summary": [[0, 0.2], [0.2, 0.4], [0.4, 0.6], [0.6, 0.8], [0.8, 1]],
    "all": [[0, 0.05], [0.05, 0.1], [0.1, 0.15], [0.15, 0.2], [0.2, 1]],
}
_DESCRIPTIONS = {
    "summary": "relative error of the outputs' statistics (Max, Min, Mean, Norm) against the bench; "
               "the darker, the larger",
    "all": "drop of the One Thousandth Err Ratio from inputs to outputs; the darker, the larger",
}
_TOOLTIPS = {
    "summary": {"Max diff": "NPU max - bench max", "Min diff": "NPU min - bench min",
                "Mean diff": "NPU mean - bench mean", "L2norm diff": "NPU L2 norm - bench L2 norm"},
    "all": {"One Thousandth Err Ratio": "share of elements whose relative error is below 0.001 (closer to 1 is "
                                        "better)",
            "Five Thousandths Err Ratio": "share of elements whose relative error is below 0.005 (closer to 1 is "
                                          "better)",
            "Cosine": "cosine similarity of NPU and bench tensors (closer to 1 is better)",
            "MaxAbsErr": "largest absolute error", "MaxRelativeErr": "largest relative error"},
    "md5": {"md5": "CRC-32 of the tensor bytes; equal means bit-identical"},
}


def colors_for(task: str) -> dict:
    """The `Colors` legend: 5 shades (md5: 2) plus grey for unmatched nodes."""
    if task == "md5":
        colors = {_SHADES[0]: {"value": [1, 1], "description": "every input and output md5 equals the bench"},
                  _SHADES[-1]: {"value": [0, 0], "description": "some input or output md5 differs from the bench"}}
    else:
        colors = {shade: {"value": list(bounds), "description": _DESCRIPTIONS[task]}
                  for shade, bounds in zip(_SHADES, COLOR_BINS[task])}
    colors[UNMATCHED_COLOR] = {"value": [], "description": "no matching bench node"}
    return colors


def tooltips_for(task: str) -> dict:
    return dict(_TOOLTIPS[task])


def _row_pairs(node: Node, rows: List[int], other_rows: List[int]) -> List[bridge.RowPair]:
    return [bridge.RowPair(a, b) for a, b in zip(rows, other_rows)]


def _summary_index(metrics: List[dict]) -> Optional[float]:
    worst = None
    for cells in metrics:
        for value in cells.get("_relative", ()):
            worst = value if worst is None else max(worst, value)
    return None if worst is None else min(1.0, float(worst))


def _ratio(cells: dict) -> Optional[float]:
    value = cells.get("One Thousandth Err Ratio")
    return float(value) if isinstance(value, (int, float)) else None


def _tensor_index(inputs: List[dict], outputs: List[dict]) -> Optional[float]:
    out_ratios = [r for r in map(_ratio, outputs) if r is not None]
    if not out_ratios:
        return 0.0 if outputs or inputs else None
    in_ratios = [r for r in map(_ratio, inputs) if r is not None]
    drop = (min(in_ratios) if in_ratios else 1.0) - min(out_ratios)
    return max(0.0, min(1.0, drop))


def compute_precision(mode: str, npu: Graph, bench: Graph, processes: Optional[int] = None) -> None:
    """Fill node.metrics and node.data['precision_index'] (and md5 'Result') on the NPU graph."""
    nodes = [n for n in npu.preorder() if n.matched is not None and n.node_type != API_COLLECTION
             and n is not npu.root]
    spans, pairs = [], []
    for node in nodes:
        other = node.matched
        inputs = _row_pairs(node, node.input_rows, other.input_rows)
        outputs = _row_pairs(node, node.output_rows, other.output_rows)
        spans.append((len(pairs), len(inputs), len(outputs)))
        pairs.extend(inputs)
        pairs.extend(outputs)
    metrics = bridge.pair_metrics(mode, npu.table, bench.table, pairs, processes) if pairs else []
    for node, (start, n_in, n_out) in zip(nodes, spans):
        node_metrics = metrics[start:start + n_in + n_out]
        for pair, cells in zip(pairs[start:start + n_in + n_out], node_metrics):
            node.metrics[pair.npu_row] = cells
        inputs, outputs = node_metrics[:n_in], node_metrics[n_in:]
        if mode == bridge.MODE_STATISTICS:
            index = _summary_index(outputs)
            node.data["precision_index"] = 0.0 if index is None else index
        elif mode == bridge.MODE_TENSOR:
            index = _tensor_index(inputs, outputs)
            node.data["precision_index"] = 0.0 if index is None else index
        else:
            same = all(cells["Result"] == "pass" for cells in node_metrics)
            same = same and len(node.input_rows) == len(node.matched.input_rows) \
                and len(node.output_rows) == len(node.matched.output_rows)
            node.data["precision_index"] = 1 if same else 0
            node.data["Result"] = "pass" if same else "Different"
    _collections(npu, mode)


def _collections(graph: Graph, mode: str) -> None:
    for node in graph.nodes.values():
        if node.node_type != API_COLLECTION or node.matched is None:
            continue
        values = [c.data["precision_index"] for c in node.children if "precision_index" in c.data]
        if values:
            node.data["precision_index"] = min(values) if mode == bridge.MODE_MD5 else max(values)
