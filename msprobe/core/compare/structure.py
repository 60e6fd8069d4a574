"""Structure before values: each call's parent module (construct.json), and the structural differences of
a compare (an extra, missing or swapped call or module; a differing argument) the advisor names first.

`call_parents(table)` reads construct.json beside a table's dump.json once per file: {entry: parent key},
the parent key being the parent module's path, direction and call index without its class
('model.layers.1.self_attn:forward.0'), so a swapped submodule's children still share their parent's key.
Without a module tree (level L1) the parent is the call site: the innermost stack.json frame outside the
frameworks (file, function and code, not the line number).
`structural_differences(records)` lists the differences in execution order; each is a `Difference` with the
rows it rests on and one line of text. What two ports of one model differ in by design is no difference:
dtype names passed as arguments (bf16 against fp32), the same dtype-extreme fill, a float argument within
the rounding of the coarser of the call's dtypes, and a pair whose call sequences differ wholesale (another
framework or another model: more than MAX_UNMATCHED of the calls unmatched) reports no unmatched call.
"""
import json
import os
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import numpy as np

try:
    import orjson
except ImportError:  # pragma: no cover - orjson is a base dependency; json reads the same files
    orjson = None  # type: ignore[assignment]

from msprobe.core.compare.reasons import Reason
from msprobe.core.naming import parse_name

__all__ = ["call_parents", "parent_key", "stack_site", "Difference", "structural_differences", "argument_rows",
           "MAX_UNMATCHED"]

MAX_UNMATCHED = 0.1  # the share of forward calls without counterpart above which the call sequences differ wholesale
_PARENTS: Dict[tuple, Dict[str, str]] = {}
_DTYPE_WORDS = ("float", "bfloat", "half", "double", "int", "bool", "complex")


def parent_key(parent) -> str:
    """'model.layers.1.self_attn:forward.0' of 'Module.model.layers.1.self_attn.Qwen2Attention.forward.0';
    '' for no parent; the name itself for a parent of another shape ('optimizer')."""
    if not parent:
        return ""
    parsed = parse_name(parent)
    if parsed is None or not parsed.is_module:
        return str(parent)
    path = parsed.api.rsplit(".", 1)[0] if "." in parsed.api else ""
    return f"{path}:{parsed.direction}.{parsed.index}"


def call_parents(table) -> Dict[str, str]:
    """{entry: parent key} from construct.json beside the table's dump.json; where it names no parent (level
    L1), the call site from stack.json (`stack_site`); {} when neither is there. A table made in memory
    may name its files in `table.structure_files` ((construct path or None, stack path or None))."""
    base = os.path.dirname(table.path or "")
    construct, stack = getattr(table, "structure_files", None) or (os.path.join(base, "construct.json"),
                                                                    os.path.join(base, "stack.json"))
    found = _cached(construct, _construct_parents) if construct else {}
    if not found and stack:
        found = _cached(stack, _stack_parents)
    return found


def _cached(path, read):
    try:
        stat = os.stat(path)
    except OSError:
        return {}
    key = (path, stat.st_mtime_ns, stat.st_size)
    found = _PARENTS.get(key)
    if found is None:
        try:
            with open(path, "rb") as handle:
                text = handle.read() or b"{}"
                raw = orjson.loads(text) if orjson is not None else json.loads(text)
        except (OSError, ValueError):  # orjson.JSONDecodeError is a ValueError
            raw = {}
        found = read(raw) if isinstance(raw, dict) else {}
        if len(_PARENTS) > 64:
            _PARENTS.clear()
        _PARENTS[key] = found
    return found


def _construct_parents(raw) -> Dict[str, str]:
    keys: Dict[str, str] = {}
    if not any(raw.values()):
        return {}
    return {entry: keys.setdefault(parent, parent_key(parent)) if parent else "" for entry, parent in raw.items()}


# a frame of an installed framework or of msprobe (installed, or this package wherever it lies); a user's folder
# that happens to be called torch/ or mindspore/ (tests/mindspore/...) is the user's
_FRAMEWORK_FILE = re.compile(r"/(?:site|dist)-packages/(?:torch|mindspore|msprobe|torch_npu)/")
_OWN_PACKAGE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))).replace("\\", "/") + "/"
_FRAME = re.compile(r"File ([^,]+), line \d+, in ([^,]+),([^'\"]*)")


def stack_site(text) -> str:
    """The innermost frame of a stack outside torch, mindspore and msprobe, as 'file:function:code' (no
    line number: two copies of one code base may differ in lines); '' when there is none."""
    for match in _FRAME.finditer(text):
        path = match.group(1).replace("\\", "/")
        if _FRAMEWORK_FILE.search(path) or path.startswith(_OWN_PACKAGE):
            continue
        code = match.group(3).replace("\\n", " ").strip()
        return f"{os.path.basename(path)}:{match.group(2)}:{code}"
    return ""


def _stack_parents(raw) -> Dict[str, str]:
    """{entry: 'stack:' + call site} of a stack.json ({name: [lines]} or grouped {"0": [[names], [lines]]})."""
    sites: Dict[str, str] = {}
    found = {}
    for key, value in raw.items():
        if isinstance(value, list) and len(value) == 2 and isinstance(value[0], list) and key.isdigit():
            names, lines = value[0], value[1]
        else:
            names, lines = [key], value
        text = str(lines)
        site = sites.get(text)
        if site is None:
            site = sites.setdefault(text, "stack:" + stack_site(text))
        for name in names:
            found[name] = site
    return found


@dataclass
class Difference:
    """One structural difference: kind 'extra' (a call or module only the NPU side made), 'missing' (only
    the bench side), 'swapped' (one module path, another class), 'argument' (a non-tensor argument that
    differs), 'dtype' (an op computed in another dtype in an otherwise same-dtype pair); `row` the report
    row it is named by, `entry` its call, `rows` every row it rests on, `phase` (0 forward, 3 after
    backward), `order` (NPU row position for sorting) and `text`."""
    kind: str
    row: int
    entry: str
    text: str
    phase: int = 0
    order: int = 0
    rows: List[int] = field(default_factory=list)


def _is_dtype_text(value) -> bool:
    text = str(value).lower().replace("torch.", "").replace("mindspore.", "")
    return any(text.startswith(word) for word in _DTYPE_WORDS) and " " not in text


def _coarsest_eps(records, entry_rows):
    """The largest machine epsilon among the float tensors of a call's rows (both sides); fp32's when none."""
    from msprobe.core.compare.tolerance import dtype_epsilon

    eps = 2.0 ** -23
    for side in ("npu", "bench"):
        table, positions = (records.npu, records.npu_pos) if side == "npu" else (records.bench, records.bench_pos)
        dtypes, kinds = table.columns["dtype"], table.columns["kind"]
        for row in entry_rows:
            i = int(positions[row])
            if i >= 0 and kinds[i] == "tensor":
                value = dtype_epsilon(dtypes[i])
                if value is not None and np.isfinite(value):
                    eps = max(eps, float(value))
    return eps


def argument_rows(records) -> np.ndarray:
    """Rows of non-tensor arguments (inputs) whose values differ by more than two ports of one model can:
    dtype names (bf16 against fp32) and floats within the rounding of the call's coarser dtype agree."""
    rows = np.flatnonzero((records.reason == Reason.VALUE_DIFF) & (records.roles == "input"))
    if not len(rows):
        return rows
    npu, bench = records.column("npu", "value"), records.column("bench", "value")
    entries, entry_ids = records.entries, records.entry_ids
    keep = []
    for row in rows.tolist():
        a, b = npu[row], bench[row]
        if str(a) == str(b) or _is_dtype_text(a) and _is_dtype_text(b):
            continue  # a null written by one tool and the text 'None' by the other are one value
        parsed = parse_name(entries[row]) if entries[row] is not None else None
        if parsed is None or parsed.direction != "forward":
            continue  # a backward's inputs are the gradients of its outputs, not arguments
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) \
                and not isinstance(b, bool) and (isinstance(a, float) or isinstance(b, float)):
            call_rows = np.flatnonzero(entry_ids == entry_ids[row])
            eps = _coarsest_eps(records, call_rows.tolist())
            if abs(a - b) <= eps * max(abs(a), abs(b)):
                continue
        if entries[row] is not None:
            keep.append(row)
    return np.asarray(keep, dtype=np.int64)


def _module_parts(entry) -> Optional[tuple]:
    parsed = parse_name(entry)
    if parsed is None or not parsed.is_module or "." not in parsed.api:
        return None
    path, cls = parsed.api.rsplit(".", 1)
    return path, cls, parsed.direction, parsed.index


def _unmatched_entries(records, side):
    """[(entry, first report row)] of entries of `side` none of whose rows found a counterpart (vectorised:
    NPU entries by their entry ids; bench-only rows are few, their entries' rows are contiguous)."""
    npu_rows = records.npu_pos >= 0
    if side == "npu":
        ids = records.entry_ids[npu_rows]
        if not len(ids):
            return []
        matched = np.bincount(ids, weights=(records.bench_pos[npu_rows] >= 0), minlength=int(ids.max()) + 1)
        present = np.bincount(ids, minlength=int(ids.max()) + 1) > 0
        lonely = np.flatnonzero(present & (matched == 0))
        if not len(lonely):
            return []
        first = np.full(int(ids.max()) + 1, -1, dtype=np.int64)
        rows = np.flatnonzero(npu_rows)
        first[ids[::-1]] = rows[::-1]
        entries = records.entries
        return [(entries[int(first[i])], int(first[i])) for i in lonely.tolist()]
    alone = np.flatnonzero(~npu_rows & (records.bench_pos >= 0))
    if not len(alone):
        return []
    used = np.zeros(len(records.bench), dtype=bool)
    used[records.bench_pos[records.bench_pos >= 0][npu_rows[records.bench_pos >= 0]]] = True
    entries = records.bench.columns["entry"]
    found: Dict[str, int] = {}
    for row in alone.tolist():
        entry = entries[int(records.bench_pos[row])]
        if entry not in found:
            found[entry] = row
    out = []
    for entry, row in found.items():
        position = int(records.bench_pos[row])
        low, high = position, position
        while low > 0 and entries[low - 1] == entry:
            low -= 1
        while high + 1 < len(entries) and entries[high + 1] == entry:
            high += 1
        if not used[low:high + 1].any():
            out.append((entry, row))
    return out


def _phase_of(records, side, entry, row):
    if side == "npu":
        return int(records.phases[row])
    parsed = parse_name(entry)
    if parsed is None or parsed.direction != "forward":
        return 1
    return 3 if entry in records.extra.get("bench_after_backward", ()) else 0


def _bench_after_backward(bench):
    """Bench forward entries recorded after its first backward entry (the optimizer step)."""
    seen, after = False, set()
    for entry in dict.fromkeys(bench.columns["entry"]):
        parsed = parse_name(entry)
        if parsed is None:
            continue
        if parsed.direction == "backward":
            seen = True
        elif seen and parsed.direction == "forward":
            after.add(entry)
    return after


def _bench_order(records):
    """Per report row of a bench-only row, the NPU row position just after its bench predecessor's
    counterpart (where the missing call would have run)."""
    bench_rows = np.flatnonzero(records.npu_pos >= 0)
    where = np.full(len(records.bench) + 1, -1, dtype=np.int64)
    matched = bench_rows[records.bench_pos[bench_rows] >= 0]
    where[records.bench_pos[matched]] = matched
    return np.maximum.accumulate(where)


def _parent_text(records, side, entry):
    parents = call_parents(records.npu if side == "npu" else records.bench)
    parent = parents.get(entry, "")
    if parent.startswith("stack:"):  # a call site (no module tree): 'stack:file:function:code'
        where = parent[len("stack:"):].split(":", 2)
        return f" called from {where[1]} in {where[0]}" if len(where) == 3 and where[0] else ""
    path, _, _ = parent.partition(":")
    return f" inside {path}" if path else ""


def _call_text(entry):
    parsed = parse_name(entry)
    if parsed is None:
        return entry
    if parsed.is_module:
        return f"module {parsed.api.rsplit('.', 1)[0]} ({parsed.short_api})"
    return f"{parsed.prefix}.{parsed.api}"


def _dtype_differences(records, forward_calls):
    """Calls whose float tensors have another dtype on the two sides, in a run whose sides otherwise compute
    in the same dtypes (an op computed in bf16 in an fp32 pair): reported only where such calls are few
    (at most MAX_UNMATCHED of the forward calls); a bf16 port, or autocast on one side, differs everywhere."""
    from msprobe.core.compare.records import FLOAT_DTYPES

    matched = (records.npu_pos >= 0) & (records.bench_pos >= 0) & (records.phases != 1) & (records.phases != 2)
    if not matched.any():
        return []
    dtypes_n = np.asarray(records.npu.columns["dtype"], dtype=object)[records.npu_pos[matched]]
    dtypes_b = np.asarray(records.bench.columns["dtype"], dtype=object)[records.bench_pos[matched]]
    differ = dtypes_n != dtypes_b  # interned strings: mostly an identity check
    if not differ.any():
        return []
    floats = {d: d in FLOAT_DTYPES for d in set(dtypes_n[differ].tolist()) | set(dtypes_b[differ].tolist())}
    where = np.flatnonzero(differ)
    keep = np.fromiter(map(floats.__getitem__, dtypes_n[where].tolist()), bool, len(where)) & \
        np.fromiter(map(floats.__getitem__, dtypes_b[where].tolist()), bool, len(where))
    differ[where[~keep]] = False
    if not differ.any():
        return []
    rows = np.flatnonzero(matched)[differ]
    ids, first = np.unique(records.entry_ids[rows], return_index=True)
    if len(ids) > MAX_UNMATCHED * forward_calls():
        return []
    entries = records.entries
    found = []
    for row, a, b in zip(rows[first].tolist(), dtypes_n[differ][first].tolist(), dtypes_b[differ][first].tolist()):
        entry = entries[row]
        text = (f"{entry} computes in another dtype{_parent_text(records, 'npu', entry)}: "
                f"{records.names[row][len(entry) + 1:]} is {a} on the NPU side, {b} on the bench side, where the "
                f"rest of the run agrees in dtype")
        found.append(Difference("dtype", row, entry, text, int(records.phases[row]), row, [row]))
    return found


def _fold_into_modules(records, found):
    """Calls without counterpart made inside a module that is itself extra, missing or swapped are part of
    that difference (a swapped activation's own calls), which takes the earliest of their places."""
    modules = [d for d in found if d.kind in ("extra", "missing", "swapped") and _module_parts(d.entry)]
    if not modules:
        return found
    parents = {"npu": call_parents(records.npu), "bench": call_parents(records.bench)}
    kept = []
    for difference in found:
        if difference.kind in ("extra", "missing") and not _module_parts(difference.entry):
            side = "npu" if difference.kind == "extra" else "bench"
            path = parents[side].get(difference.entry, "").partition(":")[0]
            holder = next((m for m in modules if m.phase == difference.phase and path
                           and (path + ".").startswith(_module_parts(m.entry)[0] + ".")), None)
            if holder is not None:
                holder.order = min(holder.order, difference.order)
                holder.rows.append(difference.row)
                continue
        kept.append(difference)
    return kept


def structural_differences(records) -> List[Difference]:
    """The structural differences of `records`, in execution order (forward pass first; backward calls, which
    repeat the forward's structure, are left out)."""
    if "structure" in records.extra:
        return records.extra["structure"]
    found: List[Difference] = []
    npu_extra = [(e, r) for e, r in _unmatched_entries(records, "npu") if _phase_of(records, "npu", e, r) in (0, 3)]
    bench_extra = _unmatched_entries(records, "bench")
    if bench_extra:
        records.extra["bench_after_backward"] = _bench_after_backward(records.bench)
        bench_extra = [(e, r) for e, r in bench_extra if _phase_of(records, "bench", e, r) in (0, 3)]

    def forward_calls():
        return max(1, sum(1 for e in records.npu.entries if isinstance(e, str) and (e.endswith(".forward")
                                                                                     or ".forward." in e)))
    same_framework = records.npu.header.get("framework") == records.bench.header.get("framework")
    unmatched = len(npu_extra) + len(bench_extra)
    wholesale = not same_framework or (unmatched > 0 and unmatched > MAX_UNMATCHED * forward_calls())
    if not wholesale and unmatched:
        order = _bench_order(records) if bench_extra else None
        bench_modules = {}
        for entry, row in bench_extra:
            parts = _module_parts(entry)
            if parts is not None:
                bench_modules[(parts[0], parts[2], parts[3])] = (entry, row)
        swapped_bench = set()
        for entry, row in npu_extra:
            parts = _module_parts(entry)
            twin = bench_modules.get((parts[0], parts[2], parts[3])) if parts is not None else None
            if twin is not None and parts is not None:
                swapped_bench.add(twin[0])
                other = _module_parts(twin[0]) or parts
                text = (f"module {parts[0]} is {parts[1]} on the NPU side and {other[1]} on the bench side "
                        f"(a swapped module: {entry} / {twin[0]})")
                found.append(Difference("swapped", row, entry, text, _phase_of(records, "npu", entry, row), row,
                                        [row, twin[1]]))
            else:
                text = f"an extra {_call_text(entry)}{_parent_text(records, 'npu', entry)} on the NPU side ({entry})"
                found.append(Difference("extra", row, entry, text, _phase_of(records, "npu", entry, row), row, [row]))
        for entry, row in bench_extra:
            if entry in swapped_bench:
                continue
            position = int(records.bench_pos[row])
            before = int(order[position - 1]) if position > 0 and order is not None else -1
            text = (f"a missing {_call_text(entry)}{_parent_text(records, 'bench', entry)}: the bench side calls it, "
                    f"the NPU side does not ({entry})")
            found.append(Difference("missing", row, entry, text, _phase_of(records, "bench", entry, row),
                                    before + 1, [row]))
    entries = records.entries
    arguments = argument_rows(records).tolist()
    npu_values, bench_values = (records.column(side, "value") for side in ("npu", "bench")) if arguments else ([], [])
    for row in arguments:
        entry = entries[row]
        values = npu_values[row], bench_values[row]
        text = (f"{entry} is called with another argument{_parent_text(records, 'npu', entry)}: "
                f"{records.names[row][len(entry) + 1:]} is {values[0]} on the NPU side, {values[1]} on the bench side")
        found.append(Difference("argument", row, entry, text, int(records.phases[row]), row, [row]))
    found += _dtype_differences(records, forward_calls)
    found = _fold_into_modules(records, found)
    # forward pass first, then the optimizer step; in each, execution order
    found.sort(key=lambda d: (d.phase != 0, d.order))
    records.extra["structure"] = found
    return found
