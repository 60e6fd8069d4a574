"""Pair NPU rows with bench rows: exact names (after mapping), or fuzzy (ignoring call counters).

Returns `bench_index`: for each NPU row the index of its bench row, or -1 when none matched, plus
the indices of bench rows no NPU row took (reported at the end, never dropped).

Calls are paired within their parent (structure.call_parents: the module in construct.json, at level L1
the call site in stack.json): where an exact
name pairs two API calls whose parents differ (an extra call on one side shifts every later counter of
its API), the calls of each (parent, API) group that holds such a pair are paired again by the fuzzy
rule inside the group (in order, equal shapes first), and a call left over is an extra or missing call,
not another call's counterpart.
"""
from collections import defaultdict
from itertools import repeat

import numpy as np

from msprobe.core.compare.structure import call_parents
from msprobe.core.naming import parse_name

__all__ = ["match_rows", "entry_op_key"]


def entry_op_key(entry):
    """The entry name without its call counter: 'Functional.linear.3.forward' -> 'Functional.linear.forward'."""
    parsed = parse_name(entry)
    return parsed.op_name if parsed else entry


def _exact(npu, bench, mapper):
    positions = {name: i for i, name in enumerate(bench.columns["name"])}
    names, entries = npu.columns["name"], npu.columns["entry"]
    if mapper is not None and mapper.active:
        keys = [mapper.map_row(name, entry) for name, entry in zip(names, entries)]
    else:
        keys = names
    return np.fromiter(map(positions.get, keys, repeat(-1)), dtype=np.int64, count=len(keys))


def _entry_rows(table):
    """entry -> (list of row indices, signature of its tensor shapes)."""
    rows = defaultdict(list)
    for index, entry in enumerate(table.columns["entry"]):
        rows[entry].append(index)
    shapes = table.columns["shape_key"]
    return {entry: (idx, tuple(shapes[i] for i in idx)) for entry, idx in rows.items()}


def _align(npu_entries, bench_entries, npu_rows, bench_rows):
    """Greedy in-order alignment of two call sequences of one operator, preferring equal shapes."""
    pairs, start = [], 0
    for entry in npu_entries:
        signature = npu_rows[entry][1]
        for j in range(start, len(bench_entries)):
            if bench_rows[bench_entries[j]][1] == signature:
                pairs.append((entry, bench_entries[j]))
                start = j + 1
                break
        else:
            if start < len(bench_entries) and len(npu_entries) == len(bench_entries):
                pairs.append((entry, bench_entries[start]))  # same call count: pair in order anyway
                start += 1
    return pairs


def _fuzzy(npu, bench, mapper):
    npu_rows, bench_rows = _entry_rows(npu), _entry_rows(bench)
    by_op_npu, by_op_bench = defaultdict(list), defaultdict(list)
    for entry in npu_rows:
        mapped = mapper.map_entry(entry) if mapper is not None else entry
        by_op_npu[entry_op_key(mapped)].append(entry)
    for entry in bench_rows:
        by_op_bench[entry_op_key(entry)].append(entry)
    bench_names = {name: i for i, name in enumerate(bench.columns["name"])}
    result = np.full(len(npu), -1, dtype=np.int64)
    names = npu.columns["name"]
    for op, entries in by_op_npu.items():
        for npu_entry, bench_entry in _align(entries, by_op_bench.get(op, []), npu_rows, bench_rows):
            for i in npu_rows[npu_entry][0]:
                suffix = names[i][len(npu_entry):]
                result[i] = bench_names.get(bench_entry + suffix, -1)
    return result


def _entry_pairs(npu, bench, bench_index):
    """{NPU entry: bench entry} of the rows paired (the first row of each entry decides)."""
    npu_entries, bench_entries = npu.columns["entry"], bench.columns["entry"]
    pairs = {}
    for i in np.flatnonzero(bench_index >= 0).tolist():
        pairs.setdefault(npu_entries[i], bench_entries[bench_index[i]])
    return pairs


def _within_parents(npu, bench, bench_index, mapper):
    """bench_index with the API calls of every (parent, API) group that holds a pair across parents paired
    again inside the group; unchanged without parents
    on both sides (neither construct.json nor stack.json), or when every pair already shares its parent."""
    if (npu.header.get("framework") or "pytorch") != (bench.header.get("framework") or "pytorch"):
        return bench_index  # two frameworks' code bases share no call sites; their APIs pair through the mapping
    parents_n, parents_b = call_parents(npu), call_parents(bench)
    if not parents_n or not parents_b:
        return bench_index
    mapped = (lambda e: mapper.map_entry(e)) if mapper is not None and mapper.active else (lambda e: e)
    pairs = _entry_pairs(npu, bench, bench_index)
    disturbed = set()
    for entry, other in pairs.items():
        parsed = parse_name(entry)
        if parsed is not None and not parsed.is_module and parents_n.get(entry, "") != parents_b.get(other, ""):
            disturbed.add((parents_n.get(entry, ""), entry_op_key(mapped(entry))))
            disturbed.add((parents_b.get(other, ""), entry_op_key(other)))
    if not disturbed:
        return bench_index
    groups_n, groups_b = defaultdict(list), defaultdict(list)
    for entry in dict.fromkeys(npu.columns["entry"]):
        key = (parents_n.get(entry, ""), entry_op_key(mapped(entry)))
        if key in disturbed:
            groups_n[key].append(entry)
    for entry in dict.fromkeys(bench.columns["entry"]):
        key = (parents_b.get(entry, ""), entry_op_key(entry))
        if key in disturbed:
            groups_b[key].append(entry)
    npu_rows, bench_rows = _entry_rows(npu), _entry_rows(bench)
    bench_names = {name: i for i, name in enumerate(bench.columns["name"])}
    names = npu.columns["name"]
    result = bench_index.copy()
    for key, entries in groups_n.items():
        for entry in entries:
            result[npu_rows[entry][0]] = -1
        for npu_entry, bench_entry in _align(entries, groups_b.get(key, []), npu_rows, bench_rows):
            for i in npu_rows[npu_entry][0]:
                result[i] = bench_names.get(bench_entry + names[i][len(npu_entry):], -1)
    # every NPU call exactly paired with a call of a regrouped bench group is in a regrouped group itself
    # (its own key is that group's when the parents agree, and was marked when they do not)
    return result


def match_rows(npu, bench, fuzzy=False, mapper=None):
    """(bench_index per NPU row, unmatched bench row indices)."""
    if fuzzy:
        bench_index = _fuzzy(npu, bench, mapper)
        exact = _exact(npu, bench, mapper)
        bench_index = np.where(exact >= 0, exact, bench_index) if mapper is not None and mapper.data else bench_index
    else:
        bench_index = _within_parents(npu, bench, _exact(npu, bench, mapper), mapper)
    used = np.zeros(len(bench), dtype=bool)
    valid = bench_index[bench_index >= 0]
    used[valid] = True
    # a bench row matched twice would make the second pairing meaningless; a pairing the user asked
    # for in data_mapping wins over one found by name
    if len(valid) != len(np.unique(valid)):
        names = npu.columns["name"]
        explicit = [i for i in range(len(names)) if mapper is not None and names[i] in mapper.data]
        seen = set()
        for i in explicit + [i for i in range(len(names)) if mapper is None or names[i] not in mapper.data]:
            j = bench_index[i]
            if j >= 0:
                if j in seen:
                    bench_index[i] = -1
                seen.add(j)
    return bench_index, np.flatnonzero(~used)
