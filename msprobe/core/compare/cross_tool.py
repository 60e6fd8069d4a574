"""A mixed pair (one msprobe dump, one reference-tool dump): the matched rows not comparable across tools.

The reader (core/io/normalise.py) records in each table which rows mean something else in the other tool's
layout (`header["not_comparable"]`); this marks the matched rows of a pair with Reason.CROSS_TOOL.
"""
import numpy as np

from msprobe.core.compare.reasons import Reason
from msprobe.core.io.normalise import LEFT_OUT, TOOL_MSPROBE, TOOL_REFERENCE

__all__ = ["tools_differ", "mark_not_comparable"]


def tools_differ(npu, bench):
    """Whether two DumpTables were laid out by different tools (a mixed pair)."""
    return npu.header.get("tool", TOOL_MSPROBE) != bench.header.get("tool", TOOL_MSPROBE)


def mark_not_comparable(npu, bench, npu_pos, bench_pos, reason, detail):
    """In a mixed pair: matched rows either side's normalisation called not comparable across tools get
    Reason.CROSS_TOOL and the why in `detail` (in place)."""
    matched = (npu_pos >= 0) & (bench_pos >= 0)
    _mark_unrecorded_objects(npu, bench, npu_pos, bench_pos, reason, detail)
    for table, positions in ((npu, npu_pos), (bench, bench_pos)):
        prefixes = table.header.get("not_comparable") or {}
        if not prefixes or not len(table):
            continue
        starts = tuple(prefixes)
        flagged = {index: _why(prefixes, name) for index, name in enumerate(table.columns["name"])
                   if name.startswith(starts)}
        if not flagged:
            continue
        for row in np.flatnonzero(matched & np.isin(positions, list(flagged))).tolist():
            why = flagged[int(positions[row])]
            if why is LEFT_OUT and reason[row] not in (Reason.VALUE_DIFF, Reason.BENCH_NONE):
                continue  # no gradient on either side: the same
            if why is not None:
                reason[row] = Reason.CROSS_TOOL
                detail[row] = why


def _why(prefixes, name):
    for prefix, why in prefixes.items():
        if name == prefix or name.startswith(prefix + "."):
            return why
    return None


def _mark_unrecorded_objects(npu, bench, npu_pos, bench_pos, reason, detail):
    """A reference dump writes null for an object it cannot describe (a transformers cache) where msprobe
    writes the object's text: not a differing value."""
    kinds = (npu.columns["kind"] if len(npu) else [], bench.columns["kind"] if len(bench) else [])
    tools = (npu.header.get("tool"), bench.header.get("tool"))
    for row in np.flatnonzero(np.isin(reason, [Reason.VALUE_DIFF, Reason.BENCH_NONE])).tolist():
        pair = (kinds[0][npu_pos[row]], kinds[1][bench_pos[row]])
        for side in (0, 1):
            if pair[side] == "none" and pair[1 - side] == "text" and tools[side] == TOOL_REFERENCE:
                reason[row] = Reason.CROSS_TOOL
                detail[row] = "the reference tool records no value for an object of this type"
