"""Overflow level of each node from its dumped statistics (`-oc`).

A tensor is anomalous when its Max, Min or Mean is inf, -inf or nan.
* critical: every input normal, an output anomalous;
* high: inputs and an output anomalous, or an output Norm above 100x the largest input Norm;
* medium: an input anomalous, the outputs normal.
Buffers that legitimately hold garbage are ignored: the outputs of `empty*` factories and the receive
buffers (input 0) of recv / all_gather / reduce_scatter collectives.
"""
import math
import re
from typing import List, Optional

from msprobe.visualization.graph_model import API_COLLECTION, Graph, Node

__all__ = ["overflow_level", "mark_overflow", "CRITICAL", "HIGH", "MEDIUM"]

CRITICAL, HIGH, MEDIUM = "critical", "high", "medium"
_IGNORE_OUTPUTS = re.compile(r"^(Torch|Tensor|Mint|Functional)\.(empty|empty_like|empty_strided|new_empty)\.\d+\.")
_IGNORE_INPUT0 = re.compile(r"^Distributed\.(recv|irecv|all_gather|all_gather_into_tensor|_all_gather_base|"
                            r"reduce_scatter|reduce_scatter_tensor|_reduce_scatter_base)\.\d+\.")
_NORM_GROWTH = 100.0


def _anomalous(columns, row: int) -> bool:
    if columns["kind"][row] != "tensor":
        return False
    return any(not math.isfinite(columns[key][row]) and not (columns["absent"][row] & bit)
               for key, bit in (("max", 1), ("min", 2), ("mean", 4)))


def overflow_level(graph: Graph, node: Node) -> Optional[str]:
    columns = graph.table.columns
    # a module's parameters are not its inputs here: an inf weight makes the module "critical"
    inputs: List[int] = [r for r in node.input_rows if columns["role"][r] != "parameters"]
    outputs: List[int] = list(node.output_rows)
    if _IGNORE_OUTPUTS.match(node.id):
        outputs = []
    if _IGNORE_INPUT0.match(node.id) and inputs:
        inputs = inputs[1:]
    bad_in = any(_anomalous(columns, r) for r in inputs)
    bad_out = any(_anomalous(columns, r) for r in outputs)
    if bad_out:
        return HIGH if bad_in else CRITICAL
    if bad_in:
        return MEDIUM
    norms = [columns["norm"][r] for r in inputs if columns["kind"][r] == "tensor"]
    largest = max((n for n in norms if math.isfinite(n)), default=None)
    if largest is not None and largest > 0:
        for row in outputs:
            norm = columns["norm"][row]
            if columns["kind"][row] == "tensor" and math.isfinite(norm) and norm > _NORM_GROWTH * largest:
                return HIGH
    return None


def mark_overflow(graph: Graph) -> int:
    """Set data['overflow_level'] on anomalous nodes; returns how many were marked."""
    if graph.table is None:
        return 0
    marked = 0
    for node in graph.nodes.values():
        if node.node_type == API_COLLECTION or node is graph.root:
            continue
        level = overflow_level(graph, node)
        if level:
            node.data["overflow_level"] = level
            marked += 1
    return marked
