"""Precision index, colours, legend and tooltips of a compare graph, per dump mode.

* statistics (`task: summary`) and tensor (`task: all`): the node's verdict from compare's dtype-aware
  judgement and advisor (`verdict`): 5 levels, from "within the dtype tolerance" to "the advisor's
  suspect", each drawn inside its colour bin (1.2.1's bins and colours); only the suspect's node is in
  the darkest bin, so the graph and compare name the same place. The metric cells (diffs, relative
  errors, Cosine, ...) stay 1.2.1's.
* md5: 1 when every input and output md5 equals the bench one, else 0 (1 good), plus `Result`.

An API collection takes the worst of its children; unmatched nodes get no index (grey).
"""
from typing import List, Optional

from msprobe.visualization import compare_bridge as bridge
from msprobe.visualization.graph_model import API_COLLECTION, Graph, Node
from msprobe.visualization.verdict import LEVEL_TEXT, SUSPECT, level_index, node_levels, suspect_node_of

__all__ = ["TASK_OF_MODE", "compute_precision", "colors_for", "tooltips_for", "UNMATCHED_COLOR", "COLOR_BINS"]

TASK_OF_MODE = {bridge.MODE_STATISTICS: "summary", bridge.MODE_TENSOR: "all", bridge.MODE_MD5: "md5"}
UNMATCHED_COLOR = "#C7C7C7"
_SHADES = ("#FFFCF3", "#FFEDBE", "#FFDC7F", "#FFC62E", "#FF704D")
COLOR_BINS = {
    "summary": [[0, 0.2], [0.2, 0.4], [0.4, 0.6], [0.6, 0.8], [0.8, 1]],
    "all": [[0, 0.05], [0.05, 0.1], [0.1, 0.15], [0.15, 0.2], [0.2, 1]],
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
        colors = {shade: {"value": list(bounds), "description": text}
                  for shade, bounds, text in zip(_SHADES, COLOR_BINS[task], LEVEL_TEXT)}
    colors[UNMATCHED_COLOR] = {"value": [], "description": "no matching bench node"}
    return colors


def tooltips_for(task: str) -> dict:
    return dict(_TOOLTIPS[task])


def _row_pairs(node: Node, rows: List[int], other_rows: List[int]) -> List[bridge.RowPair]:
    return [bridge.RowPair(a, b) for a, b in zip(rows, other_rows)]


def compute_precision(mode: str, npu: Graph, bench: Graph, processes: Optional[int] = None,
                      fuzzy: bool = False) -> None:
    """Fill node.metrics and node.data['precision_index'] (and md5 'Result') on the NPU graph; in
    statistics and tensor mode npu.records holds compare's records (judgement, suspect) behind them."""
    nodes = [n for n in npu.preorder() if n.matched is not None and n.node_type != API_COLLECTION
             and n is not npu.root]
    spans, pairs = [], []
    for node in nodes:
        other = node.matched
        inputs = _row_pairs(node, node.input_rows, other.input_rows)
        outputs = _row_pairs(node, node.output_rows, other.output_rows)
        spans.append((len(pairs), len(inputs) + len(outputs)))
        pairs.extend(inputs)
        pairs.extend(outputs)
    records = None
    if mode != bridge.MODE_MD5 and len(npu.table) and len(bench.table):
        records = bridge.judge_pairs(mode, npu.table, bench.table, pairs, processes, fuzzy)
    npu.records = records
    metrics = bridge.pair_metrics(mode, npu.table, bench.table, pairs, processes, records) if pairs else []
    for node, (start, count) in zip(nodes, spans):
        for pair, cells in zip(pairs[start:start + count], metrics[start:start + count]):
            node.metrics[pair.npu_row] = cells
        if mode == bridge.MODE_MD5:
            same = all(cells["Result"] == "pass" for cells in metrics[start:start + count])
            same = same and len(node.input_rows) == len(node.matched.input_rows) \
                and len(node.output_rows) == len(node.matched.output_rows)
            node.data["precision_index"] = 1 if same else 0
            node.data["Result"] = "pass" if same else "Different"
    if mode != bridge.MODE_MD5:
        levels = node_levels(records, nodes) if records is not None else {}
        bins = COLOR_BINS[TASK_OF_MODE[mode]]
        for node in nodes:
            level, closeness = levels.get(node.id, (0, 0.0))
            node.data["precision_index"] = level_index(level, closeness, bins)
        holder = suspect_node_of(npu, bench, records)
        npu.first_suspect = holder.id if holder is not None else None
        if holder is not None:  # the darkest bin, matched or not (an extra call has no counterpart)
            holder.data["precision_index"] = level_index(SUSPECT, 1.0, bins)
    _collections(npu, mode)


def _collections(graph: Graph, mode: str) -> None:
    for node in graph.nodes.values():
        if node.node_type != API_COLLECTION or node.matched is None:
            continue
        values = [c.data["precision_index"] for c in node.children if "precision_index" in c.data]
        if values:
            node.data["precision_index"] = min(values) if mode == bridge.MODE_MD5 else max(values)
