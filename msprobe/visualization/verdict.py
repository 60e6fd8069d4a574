"""Node verdicts of a compare graph from compare's dtype-aware judgement and its advisor (one source).

Every matched node gets one of five levels from the judgement of its rows (`tolerance.judge_rows`, the
same rows `msprobe compare` judges) and the advisor's suspect (`advisor.find_suspect`):

    level        meaning                                                               colour
    WITHIN       every compared output is within what the dtypes explain               lightest
    AMPLIFIED    an output is beyond tolerance, but by at most AMPLIFICATION times
                 what the call's inputs carried (rounding amplified by the operation)
    CONSEQUENCE  an output is beyond tolerance and so is an input (an earlier difference)
    OWN          an output is beyond tolerance while the inputs agree (a module enclosing the
                 suspect, or a later cause; after a forward suspect, backward and optimizer calls
                 count as consequences)
    SUSPECT      the node holding the advisor's suspect row                            darkest

When the advisor finds no suspect, a node whose input differs is AMPLIFIED too (no cause to be a
consequence of). Only the suspect's node reaches the darkest bin, so the graph's worst node and its "first" badge are
the advisor's suspect, and a pair in which the advisor finds nothing has no node in that bin. The suspect's
node (`suspect_node_of`) is the node holding the suspect row, matched or not (an extra call has no
counterpart); for a call only the bench side made, the NPU counterpart of its nearest matched bench
ancestor (the module in which the NPU side lacks it). The document names it ("FirstSuspect") and the
viewer's "first" badge follows that name, whatever the node's colour.
`service.graph_verdict` compares two dump directories and says which node that is.
"""
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import numpy as np

from msprobe.core.compare.advisor import _new_error as own_difference
from msprobe.core.compare.advisor import row_flags
from msprobe.core.compare.reasons import Reason
from msprobe.visualization.graph_model import API_COLLECTION

__all__ = ["WITHIN", "AMPLIFIED", "CONSEQUENCE", "OWN", "SUSPECT", "LEVEL_TEXT", "node_levels", "level_index",
           "GraphVerdict", "verdict_of_document", "suspect_node_of", "missing_call_place"]

WITHIN, AMPLIFIED, CONSEQUENCE, OWN, SUSPECT = range(5)
LEVEL_TEXT = (
    "within the dtype tolerance: every compared output differs by no more than the two sides' precision "
    "explains (the darker, the closer to the allowance)",
    "beyond the dtype tolerance, but only amplifying the rounding its inputs carried (within 4x)",
    "beyond the dtype tolerance because an input already differs (a consequence of an earlier difference)",
    "beyond the dtype tolerance while its inputs agree: a module that holds the first suspect, or a difference "
    "of its own after it",
    "the first suspect: the advisor's pick, where the difference starts (the same as compare's advisor)",
)


def _row_ratio(judgement) -> np.ndarray:
    """max over checks of score / allowance per row (0 where nothing was judged)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = judgement.scores / judgement.allowed
    return np.nan_to_num(ratio, nan=0.0, posinf=1.0).max(axis=1, initial=0.0)


def node_levels(records, nodes) -> Dict[str, tuple]:
    """{node id: (level, closeness)} for `nodes` (matched, not collections); closeness in [0, 1] is how
    near the node's worst output row comes to its allowance (WITHIN nodes only). Record row i must be
    NPU row i (compare_bridge.judge_pairs)."""
    judgement = records.judgement
    bad, compared = row_flags(records)  # the advisor's reading of each row
    bad_out = bad | (records.reason == Reason.VALUE_DIFF)
    ratio = _row_ratio(judgement)
    suspect_row = records.suspect.row if records.suspect is not None else -1
    # after a forward suspect, differing backward and optimizer calls inherit it through saved tensors
    # (not inputs of theirs), as the advisor reads them: consequences, never later causes
    inherited = records.phases > 0 if records.suspect is not None and records.suspect.phase == "forward" \
        else np.zeros(len(records), dtype=bool)
    # rows the advisor passed over as differences without a cause of their own (amplified rounding, what
    # reads it, a backward reading a forward that already differed, a module returning such a tensor)
    passed = np.zeros(len(records), dtype=bool)
    passed[list(records.extra.get("amplified") or []) + list(records.extra.get("consequence") or [])] = True
    levels = {}
    for node in nodes:
        inputs = np.asarray(node.input_rows, dtype=np.int64)
        outputs = np.asarray(node.output_rows, dtype=np.int64)
        if suspect_row in node.input_rows or suspect_row in node.output_rows:
            levels[node.id] = (SUSPECT, 1.0)
            continue
        differing = outputs[bad_out[outputs]] if len(outputs) else outputs
        if not len(differing):
            closeness = float(min(1.0, ratio[outputs].max())) if len(outputs) else 0.0
            levels[node.id] = (WITHIN, closeness)
        elif ((len(inputs) and bad[inputs].any()) or inherited[differing].any()) and records.suspect is None:
            # no cause anywhere: what differs is rounding amplified by the operations, and what reads it
            levels[node.id] = (AMPLIFIED, 1.0)
        elif (len(inputs) and bad[inputs].any()) or inherited[differing].any():
            levels[node.id] = (CONSEQUENCE, 1.0)
        elif passed[differing].all():
            levels[node.id] = (AMPLIFIED if records.suspect is None else CONSEQUENCE, 1.0)
        elif len(own_difference(records, differing, inputs[compared[inputs]] if len(inputs) else inputs)):
            levels[node.id] = (OWN, 1.0)
        else:
            levels[node.id] = (AMPLIFIED, 1.0)
    return levels


def suspect_node_of(npu, bench, records):
    """The NPU node that holds the advisor's suspect (None without one): the node holding the row, else,
    for a row only the bench side has, the NPU counterpart of the nearest matched ancestor of the bench
    node holding it."""
    if records is None or records.suspect is None:
        return None
    row = records.suspect.row
    npu_row = int(records.npu_pos[row]) if row < len(records.npu_pos) else -1
    if npu_row >= 0:
        return next((n for n in npu.nodes.values() if npu_row in n.input_rows or npu_row in n.output_rows), None)
    bench_row = int(records.bench_pos[row]) if row < len(records.bench_pos) else -1
    order = bench.preorder()
    holder = next((n for n in order if bench_row in n.input_rows or bench_row in n.output_rows),
                  None) if bench_row >= 0 else None
    if holder is None:
        return None
    chain = [{"id": n.id, "type": n.node_type, "matched": n.matched.id if n.matched is not None else None,
              "up": n.parent.id if n.parent is not None else None} for n in order]
    found = missing_call_place(chain, holder.id)
    return npu.nodes.get(found) if found is not None else None


def missing_call_place(chain, holder):
    """Where the NPU side lacks a call of the bench side: the NPU counterpart of the bench node `holder`'s
    nearest matched module ancestor (not the root, not an API collection), else (no module tree, level
    L1) of the last matched call before it in execution order. `chain`: the bench nodes in pre-order as
    dicts {id, type, matched (NPU id or None), up (parent id or None)}."""
    nodes = {n["id"]: n for n in chain}
    node = nodes[holder]
    while node is not None:
        if node["matched"] is not None and node["type"] != API_COLLECTION and node["up"] is not None \
                and node["id"] != holder:
            return node["matched"]
        node = nodes.get(node["up"]) if node["up"] is not None else None
    position = next(i for i, n in enumerate(chain) if n["id"] == holder)
    before = [n for n in chain[:position] if n["matched"] is not None and n["type"] != API_COLLECTION
              and n["up"] is not None]
    return before[-1]["matched"] if before else None


def level_index(level: int, closeness: float, bins: List[List[float]]) -> float:
    """The precision index of a level: inside the level's colour bin (bins: 5 [lo, hi], lightest first);
    the suspect gets 1, WITHIN nodes 0 .. 3/4 of the first bin by closeness."""
    if level == SUSPECT:
        return 1.0
    lo, hi = bins[level]
    if level == WITHIN:
        return round(hi * 0.75 * max(0.0, min(1.0, closeness)), 6)
    return round((lo + hi) / 2, 6)


@dataclass
class GraphVerdict:
    """What a compare graph says: `worst_node` (the node with the highest precision index when it is
    beyond the dtype tolerance by more than amplified rounding, else None), `first_node` (the node the
    viewer marks "first": the first node in execution order in the darkest colour bin, else None),
    `suspect` (the advisor's suspect row name, or None), `suspect_node` (the graph node holding that row, or
    None) and `index` ({node id: precision index}). Graph and advisor agree when worst_node == first_node == suspect_node."""
    worst_node: Optional[str]
    first_node: Optional[str]
    suspect: Optional[str]
    index: Dict[str, float] = field(default_factory=dict)
    suspect_node: Optional[str] = None


def verdict_of_document(document: dict, suspect: Optional[str] = None, bench_only: bool = False) -> GraphVerdict:
    """The GraphVerdict a compare `.vis` document shows (the viewer's "first" rule, applied in Python);
    `bench_only`: the suspect row is one only the bench side has (a missing call), looked up there."""
    task, nodes = document.get("task"), document["NPU"]["node"]
    marked = document.get("FirstSuspect")
    index = {k: v["data"]["precision_index"] for k, v in nodes.items()
             if (v.get("matched_node_link") or k == marked) and "precision_index" in v.get("data", {})}
    leaves = {k: x for k, x in index.items() if nodes[k]["node_type"] != 9}
    if task == "md5":
        badness = {k: 1 - x for k, x in leaves.items()}
        top, beyond = 1, 0
    else:
        lows = sorted(v["value"][0] for v in document["Colors"].values() if v.get("value"))
        # amplified rounding is beyond the dtype tolerance but no finding: the worst node is a consequence,
        # a difference of its own or the suspect
        badness, top, beyond = leaves, lows[-1], lows[2]
    position = {k: i for i, k in enumerate(nodes)}
    first = next((k for k in nodes if k in badness and badness[k] >= top), None)
    if "FirstSuspect" in document:  # the badge follows the advisor's suspect, whatever the node's colour
        first = marked
    worst = max(badness, key=lambda k: (badness[k], -position[k]), default=None)
    if worst is not None and badness[worst] <= (beyond if task != "md5" else 0):
        worst = None
    holder = _holder(nodes, suspect) if not bench_only else None
    if holder is None and suspect is not None:  # a call only the bench side made: where the NPU side lacks it
        bench_nodes = document["Bench"]["node"]
        found = _holder(bench_nodes, suspect)
        chain = [{"id": k, "type": v["node_type"], "up": v.get("upnode") if v.get("upnode") != "None" else None,
                  "matched": v["matched_node_link"][-1] if v.get("matched_node_link") else None}
                 for k, v in bench_nodes.items()]
        holder = missing_call_place(chain, found) if found is not None else None
    return GraphVerdict(worst, first, suspect, index, holder)


def _holder(nodes, row_name):
    """The id of the node whose input or output data holds `row_name` (None: no such node)."""
    return next((k for k, v in nodes.items() if row_name is not None and (row_name in v.get("input_data", {})
                                                                         or row_name in v.get("output_data", {}))),
                None)
