"""Turn graphs into the `.vis` JSON that tb-graph-ascend reads (and the HTML viewer embeds).

Build mode: `{"root", "dump_data_dir", "node", "MicroSteps", "OverflowCheck"}`; compare mode: `{"NPU": {...},
"Bench": {...}, "ToolTip": "<JSON string>", "Colors": {...}, "MicroSteps", "task", "OverflowCheck"}`, plus
"FirstSuspect" (statistics and tensor mode: the NPU node id holding compare's advisor's suspect, or null), the
node the viewer's "first" badge marks whatever its colour.
Statistics are strings (`"1.234568"`, `"inf"`); the file is strict JSON (no NaN literals), because the
plugin's parser and browsers reject them.

`matched_node_link` is the counterpart's ancestor chain plus its id while that chain holds at most
LINK_CHAIN_LIMIT ids, else just `[counterpart id]` (the form tb-graph-ascend itself writes for nodes matched
by hand; its viewer reads only the last id). Whole chains for every node of a deep tree would make the file
quadratic in depth: an 8,000-deep chain gave a 2 GB file.
"""
import json
import math
import os
from typing import Dict, List, Optional

from msprobe.core.paths import FILE_MODE, atomic_write_text
from msprobe.visualization.graph_model import API_COLLECTION, Graph, Node

__all__ = ["format_number", "graph_nodes_json", "build_document", "compare_document", "write_vis"]

_TENSOR_TYPE = {"pytorch": "torch.Tensor", "mindspore": "mindspore.Tensor"}
LINK_CHAIN_LIMIT = 64
_STATS = (("Max", "max", 1), ("Min", "min", 2), ("Mean", "mean", 4), ("Norm", "norm", 8))


def format_number(value) -> str:
    """A statistic as 1.2.1 writes it: 6 decimals, or scientific notation for very small/large values."""
    value = float(value)
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    magnitude = abs(value)
    if magnitude == 0 or 1e-4 <= magnitude < 1e10:
        return f"{value:.6f}"
    return f"{value:.6e}"


def _cell(value):
    """A metric cell as strict JSON: numbers stay numbers unless non-finite."""
    if isinstance(value, float) and not math.isfinite(value):
        return format_number(value)
    return value


class _RowFormatter:
    """STAT dicts of table rows, cached per row."""

    def __init__(self, table, framework: str, with_md5: bool):
        self.table = table
        self.tensor_type = _TENSOR_TYPE.get(framework, "torch.Tensor")
        self.with_md5 = with_md5
        self.columns = table.columns if table is not None else {}

    def stat(self, row: int) -> dict:
        cols = self.columns
        kind = cols["kind"][row]
        if kind == "tensor":
            absent = cols["absent"][row]
            stat = {"type": self.tensor_type, "dtype": cols["dtype"][row], "shape": cols["shape"][row]}
            for key, column, bit in _STATS:
                stat[key] = "N/A" if absent & bit else format_number(cols[column][row])
            stat["data_name"] = cols["data_name"][row]
            if self.with_md5:
                stat["md5"] = cols["md5"][row]
            return stat
        if kind == "none":
            return {"type": "None", "value": "None"}
        type_name = cols["dtype"][row]
        if type_name.startswith("<class '"):
            type_name = type_name[8:-2]
        stat = {"type": type_name, "value": str(cols["value"][row])}
        if kind == "scalar":
            for key, column, _ in _STATS:
                stat[key] = format_number(cols[column][row])
        if self.with_md5:
            stat["md5"] = cols["md5"][row]
        return stat


def _link(matched: Optional[Node]) -> List[str]:
    if matched is None:
        return []
    if matched.depth >= LINK_CHAIN_LIMIT:
        return [matched.id]
    return matched.ancestors() + [matched.id]


def _node_json(node: Node, rows: _RowFormatter) -> dict:
    names = rows.columns.get("name")
    input_data, output_data = {}, {}
    for target, row_list in ((input_data, node.input_rows), (output_data, node.output_rows)):
        for row in row_list:
            stat = rows.stat(row)
            metrics = node.metrics.get(row)
            if metrics:
                stat.update((k, _cell(v)) for k, v in metrics.items() if not k.startswith("_"))
            target[names[row]] = stat
    matched = node.matched
    out = {
        "id": node.id,
        "node_type": node.node_type,
        "output_data": output_data,
        "input_data": input_data,
        "upnode": node.parent.id if node.parent is not None else "None",
        "subnodes": [child.id for child in node.children],
        "matched_node_link": _link(matched),
        "suggestions": {},
        "stack_info": list(node.stack),
        "data": dict(node.data),
    }
    if node.micro_step_id is not None:
        out["micro_step_id"] = node.micro_step_id
    if node.matched_distributed is not None:
        out["matched_distributed"] = node.matched_distributed
    if node.node_type == API_COLLECTION:
        out["stack_info"] = []
    return out


def graph_nodes_json(graph: Graph, with_md5: bool = False) -> Dict[str, dict]:
    rows = _RowFormatter(graph.table, graph.framework, with_md5)
    return {node.id: _node_json(node, rows) for node in graph.preorder()}


def build_document(graph: Graph, overflow_check: bool) -> dict:
    return {"root": graph.root.id, "dump_data_dir": graph.dump_data_dir(),
            "node": graph_nodes_json(graph), "MicroSteps": graph.micro_steps, "OverflowCheck": overflow_check}


def compare_document(npu: Graph, bench: Graph, task: str, tooltips: dict, colors: dict,
                     overflow_check: bool) -> dict:
    with_md5 = task == "md5"
    document = {
        "NPU": {"root": npu.root.id, "dump_data_dir": npu.dump_data_dir(), "node": graph_nodes_json(npu, with_md5)},
        "Bench": {"root": bench.root.id, "dump_data_dir": bench.dump_data_dir(),
                  "node": graph_nodes_json(bench, with_md5)},
        "ToolTip": json.dumps(tooltips, ensure_ascii=False),
        "Colors": colors,
        "MicroSteps": max(npu.micro_steps, bench.micro_steps),
        "task": task,
        "OverflowCheck": overflow_check,
    }
    if not with_md5:
        document["FirstSuspect"] = npu.first_suspect
    return document


def write_vis(path: str, document: dict, extra_files: Optional[List[str]] = None) -> str:
    """Write one `.vis` atomically (0640); returns its path."""
    text = json.dumps(document, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    atomic_write_text(path, text, mode=FILE_MODE)
    return os.path.abspath(path)
