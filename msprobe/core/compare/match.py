"""Pair NPU rows with bench rows: exact names (after mapping), or fuzzy (ignoring call counters).

Returns `bench_index`: for each NPU row the index of its bench row, or -1 when none matched, plus
the indices of bench rows no NPU row took (reported at the end, never dropped).
"""
from collections import defaultdict
from itertools import repeat

import numpy as np

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


def match_rows(npu, bench, fuzzy=False, mapper=None):
    """(bench_index per NPU row, unmatched bench row indices)."""
    if fuzzy:
        bench_index = _fuzzy(npu, bench, mapper)
        exact = _exact(npu, bench, mapper)
        bench_index = np.where(exact >= 0, exact, bench_index) if mapper is not None and mapper.data else bench_index
    else:
        bench_index = _exact(npu, bench, mapper)
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
