"""Compare records: the numbers, reason codes and verdicts of one compare, before any rendering.

`build_records` pairs rows (positions into the two dump tables), computes the metrics (tensor files or
statistics), the 1.2.1 verdicts and highlights, and the dtype-aware judgement; `render` turns records
into report cells, `advisor` picks the suspect from them. Nothing here makes text.
"""
import os
from dataclasses import dataclass, field
from functools import cached_property
from typing import List, Optional

import numpy as np

from msprobe.core.compare import judge
from msprobe.core.compare.contraction import explained_epsilons
from msprobe.core.io.load import MODE_MD5, MODE_TENSOR, DumpTable
from msprobe.core.compare.memo import memoized, structure_memo
from msprobe.core.compare.metrics import TENSOR_METRIC_TABLE, statistics_diffs
from msprobe.core.compare.cross_tool import mark_not_comparable, tools_differ
from msprobe.core.compare.reasons import NOT_COMPARED, UNREADABLE, Reason, reason_in
from msprobe.core.compare.tensor_pairs import compare_tensor_files
from msprobe.core.compare.tolerance import (Judgement, dtype_epsilon, judge_rows, run_epsilon, same_fill,
                                            update_scores)
from msprobe.core.naming import BACKWARD, FORWARD, parse_name

__all__ = ["CompareRecords", "build_records", "row_phases", "FLOAT_DTYPES", "PHASES"]

PHASES = ("forward", "backward", "parameters_grad", "after backward")

FLOAT_DTYPES = {"torch.float32", "torch.float16", "torch.bfloat16", "torch.float64", "Float32", "Float16",
                "BFloat16", "Float64", "float32", "float16", "bfloat16", "float64"}
_METRIC_FIELDS = tuple(m.field for m in TENSOR_METRIC_TABLE) + ("error_norm", "bench_norm")


@dataclass
class CompareRecords:
    """One compare as arrays, one element per report row: NPU rows in dump order, then bench rows no
    NPU row matched. Positions are row indices into `npu` / `bench` (-1: that side has no row).

    reason: Reason code per row; detail: text that goes with it (the unreadable file and why), or None;
    metrics: tensor mode the fields of metrics.TENSOR_METRIC_TABLE ('cosine', 'max_abs', ...), 'error_norm'
    and 'bench_norm' (float arrays, NaN where not computed); statistics mode 'diff' and
    'relative' ((rows, 4) arrays of Max, Min, Mean, Norm); verdict: 'Accuracy Reached or Not' (tensor)
    or Result (statistics / md5) per row; color / highlights / overruled: 1.2.1's highlight rules, after
    the judgement has overruled the relative ones on rows within tolerance; judgement: the dtype-aware
    judgement (tolerance.Judgement); phases: index into PHASES per row (execution phase of its call);
    suspect: the advisor's pick (advisor.Suspect) or None.
    """
    mode: str
    npu: DumpTable
    bench: DumpTable
    npu_pos: np.ndarray
    bench_pos: np.ndarray
    reason: np.ndarray
    detail: List[Optional[str]]
    fuzzy: np.ndarray
    npu_stats: np.ndarray
    bench_stats: np.ndarray
    absent: np.ndarray
    metrics: dict
    verdict: np.ndarray
    color: np.ndarray
    highlights: list
    overruled: list
    judgement: Optional[Judgement]
    entry_ids: np.ndarray
    phases: Optional[np.ndarray] = None
    suspect: object = None
    extra: dict = field(default_factory=dict)

    def __len__(self):
        return len(self.npu_pos)

    def column(self, side, key, missing=None):
        """Values of table column `key` of side 'npu' or 'bench' per row (`missing` where the side has no row)."""
        table, positions = (self.npu, self.npu_pos) if side == "npu" else (self.bench, self.bench_pos)
        values = table.columns[key] if len(table) else []
        if len(positions) and positions.min() >= 0:
            return list(map(values.__getitem__, positions.tolist()))
        return [values[i] if i >= 0 else missing for i in positions.tolist()]

    @cached_property
    def names(self):
        """The row name of each row: the NPU name, or the bench name of a bench-only row."""
        npu, bench = self.column("npu", "name"), self.column("bench", "name")
        return [n if n is not None else b for n, b in zip(npu, bench)]

    @cached_property
    def entries(self):
        npu, bench = self.column("npu", "entry"), self.column("bench", "entry")
        return [n if n is not None else b for n, b in zip(npu, bench)]

    @cached_property
    def parsed(self):
        """naming.parse_name of each row's entry (None for names of another shape), parsed once per entry."""
        by_entry = {entry: parse_name(entry) if isinstance(entry, str) else None for entry in set(self.entries)}
        return list(map(by_entry.__getitem__, self.entries))

    @cached_property
    def roles(self):
        npu, bench = self.column("npu", "role", ""), self.column("bench", "role", "")
        return np.array([n or b for n, b in zip(npu, bench)], dtype=object)

    def not_compared(self):
        """Bool per row: the row could not be compared (no counterpart, missing or unreadable file)."""
        return reason_in(self.reason, NOT_COMPARED)

    def unreadable(self):
        return reason_in(self.reason, UNREADABLE)


def _stat_array(table, positions):
    if len(table) == 0:
        return np.full((len(positions), 4), np.nan)
    array = getattr(table, "stat_array", None)
    if array is None:
        array = np.array([table.columns[s] for s in ("max", "min", "mean", "norm")], dtype=np.float64).T
    taken = array[np.clip(positions, 0, None)]
    taken[positions < 0] = np.nan
    return taken


def _absent_array(table, positions):
    """(rows, 4) bools: the dump recorded no max/min/mean/norm (null) for this row, or has no row."""
    if len(table) == 0:
        return np.ones((len(positions), 4), dtype=bool)
    bits = np.asarray(table.columns["absent"], dtype=np.int64)[np.clip(positions, 0, None)]
    bits[positions < 0] = 15
    return (bits[:, None] >> np.arange(4)) & 1 == 1


def _kinds(table, positions):
    if len(table) == 0:
        return np.full(len(positions), "missing", dtype=object)
    kinds = np.asarray(table.columns["kind"], dtype=object)[np.clip(positions, 0, None)]
    kinds[positions < 0] = "missing"
    return kinds


def row_phases(entries):
    """Index into PHASES per row: forward calls up to the first backward entry (in dump order), backward
    calls, parameter gradients, and forward calls recorded after the backward pass (the optimizer)."""
    by_entry, seen_backward = {}, False
    for entry in dict.fromkeys(entries):  # each entry's phase is set where it first appears
        parsed = parse_name(entry) if isinstance(entry, str) else None
        direction = parsed.direction if parsed else FORWARD
        if direction == BACKWARD:
            seen_backward = True
            by_entry[entry] = 1
        elif direction == FORWARD:
            by_entry[entry] = 3 if seen_backward else 0
        else:
            by_entry[entry] = 2
    return np.array(list(map(by_entry.__getitem__, entries)), dtype=np.int8)


def _entry_ids(records_entries):
    """Per row, the index of its entry in order of first appearance."""
    lookup = {entry: i for i, entry in enumerate(dict.fromkeys(records_entries))}
    return np.fromiter(map(lookup.__getitem__, records_entries), dtype=np.int64, count=len(records_entries))


def _same_fill_value(npu, bench):
    """Two float arguments that are the same dtype-extreme fill (finfo(bf16).min against finfo(fp32).min)."""
    return isinstance(npu, float) and isinstance(bench, float) and bool(same_fill(npu, bench))


def _base_reasons(npu, bench, npu_pos, bench_pos, kinds_n, kinds_b):
    """Reason per row from matching and the kinds of the two values (before any tensor file is read)."""
    reason = np.full(len(npu_pos), int(Reason.OK), dtype=np.int8)
    values_n = npu.columns["value"] if len(npu) else []
    values_b = bench.columns["value"] if len(bench) else []
    for row in np.flatnonzero((kinds_n != "tensor") | (kinds_b != "tensor")):
        i, j = npu_pos[row], bench_pos[row]
        if i < 0:
            reason[row] = Reason.NO_NPU
        elif j < 0:
            reason[row] = Reason.NO_BENCH
        elif kinds_n[row] == kinds_b[row] and (values_n[i] == values_b[j] or _same_fill_value(values_n[i], values_b[j])):
            reason[row] = Reason.NON_TENSOR
        elif kinds_b[row] == "none":
            reason[row] = Reason.BENCH_NONE
        else:
            reason[row] = Reason.VALUE_DIFF
    return reason


def _tensor_metrics(records_args, options):
    """Read the tensor files of matched tensor pairs; fills reason, detail and the metric arrays."""
    npu, bench, npu_pos, bench_pos, reason, detail = records_args
    rows = len(npu_pos)
    metrics = {name: np.full(rows, np.nan) for name in _METRIC_FIELDS}
    pairs, pair_rows = [], []
    data_n = npu.columns["data_name"] if len(npu) else []
    data_b = bench.columns["data_name"] if len(bench) else []
    for row in np.flatnonzero(reason == Reason.OK).tolist():
        i, j = npu_pos[row], bench_pos[row]
        if data_n[i] == "-1":  # a tensor row without a file name: nothing to read
            reason[row] = Reason.NPU_FILE_MISSING
            detail[row] = npu.columns["name"][i]
            continue
        bench_file = os.path.join(bench.data_dir, data_b[j]) if data_b[j] != "-1" else ""
        pairs.append((os.path.join(npu.data_dir, data_n[i]), bench_file, npu.columns["shape_key"][i],
                      bench.columns["shape_key"][j]))
        pair_rows.append(row)
    results = compare_tensor_files(pairs, options.processes, options.progress) if pairs else []
    for row, result in zip(pair_rows, results):
        for metric, value in zip(TENSOR_METRIC_TABLE, result.values):
            metrics[metric.field][row] = value
        metrics["error_norm"][row], metrics["bench_norm"][row] = result.error_norm, result.bench_norm
        reason[row] = result.reason
        detail[row] = result.detail or None
    return metrics


def _side_epsilon(table, positions, kinds):
    """Per row: the epsilon of the side's dtype, or of its run's coarsest float dtype if coarser (NaN for
    rows that are not tensors of a known dtype)."""
    if len(table) == 0:
        return np.full(len(positions), np.nan)
    floor = run_epsilon(table.columns["dtype"])
    by_dtype = {d: dtype_epsilon(d) for d in set(table.columns["dtype"])}
    dtypes = table.columns["dtype"]
    eps = np.array([by_dtype[dtypes[i]] if i >= 0 and by_dtype[dtypes[i]] is not None else np.nan
                    for i in positions.tolist()], dtype=np.float64)
    floats = eps > 0
    eps[floats] = np.maximum(eps[floats], floor)
    eps[kinds != "tensor"] = np.nan
    return eps


def _numel(table, positions):
    """Element count of each row's tensor on the table's side (1 where the side has no row)."""
    if len(table) == 0:
        return np.ones(len(positions))
    shapes = table.columns["shape_key"]
    sizes = {shape: float(np.prod(shape)) if shape else 1.0 for shape in set(shapes)}
    per_row = np.fromiter(map(sizes.__getitem__, shapes), dtype=np.float64, count=len(shapes))
    return np.where(positions >= 0, per_row[np.clip(positions, 0, None)], 1.0) if len(positions) else np.ones(0)


UPDATE_APIS = frozenset({"addcdiv_"})  # normalized optimizer updates: param.addcdiv_(m, d, value=-step)
# the same update over a param group's lists (torch.optim's foreach Adam): torch._foreach_addcdiv_(params, m, d,
# [-step per parameter]); its output i is parameter i updated
LIST_UPDATE_APIS = frozenset({"_foreach_addcdiv_"})
_AFTER_BACKWARD = 3


def _update_calls(records):
    """{entry: ({index: parameter input row}, {index: step})} of optimizer updates after the backward pass whose
    arguments all agree (a differing step size is a finding of its own, judged as usual); index None for a
    single tensor's update, i for the i-th tensor of a list update."""
    calls = {}
    names, entries, parsed_rows = records.names, records.entries, records.parsed
    values = records.npu.columns["value"] if len(records.npu) else []
    npu_pos = records.npu_pos.tolist()
    differs = (records.reason == Reason.VALUE_DIFF).tolist()
    updates = {entry: parsed.api.rsplit(".", 1)[-1] in LIST_UPDATE_APIS
               for entry, parsed in dict(zip(entries, parsed_rows)).items()
               if parsed is not None and parsed.api.rsplit(".", 1)[-1] in UPDATE_APIS | LIST_UPDATE_APIS}
    for row in np.flatnonzero(records.phases == _AFTER_BACKWARD).tolist():
        entry = entries[row]
        if entry not in updates:
            continue
        info = calls.setdefault(entry, [{}, {}, True])
        parts = names[row][len(entry) + 1:].split(".")  # input.0 / input.0.3 / input.value / output.3
        key = int(parts[2]) if len(parts) > 2 and parts[2].isdigit() else None
        value = values[npu_pos[row]] if npu_pos[row] >= 0 else None
        if parts[0] == "input" and parts[1] == "0" and (key is not None) == updates[entry]:
            info[0][key] = row
        elif parts[0] == "input" and parts[1] in ("value", "3") and isinstance(value, (int, float)):
            info[1][key] = float(value)
        if differs[row]:
            info[2] = False
    return {e: (p, v) for e, (p, v, agree) in calls.items() if p and v and agree}


def _update_rows(records):
    """(output rows, parameter rows, steps) of the optimizer updates _update_calls finds, or None."""
    calls = _update_calls(records)
    if not calls:
        return None
    rows, params, steps = [], [], []
    for row, entry in enumerate(records.entries):
        if entry in calls and records.roles[row] == "output":
            found, sizes = calls[entry]
            index = records.names[row][len(entry) + 1:].partition(".")[2]  # output.3 -> 3 of a list update
            key = int(index) if None not in found and index.isdigit() else None
            if key in found and (key in sizes or None in sizes):
                rows.append(row)
                params.append(found[key])
                steps.append(sizes.get(key, sizes.get(None)))
    return np.asarray(rows, dtype=np.int64), np.asarray(params, dtype=np.int64), steps


def _update_rule(records, judgement, stats, tensor_error, numel):
    """The judgement with optimizer update outputs judged by tolerance.update_scores (numel: the bench
    element count per row)."""
    found = memoized(records.extra.get("memo"), "update rows", lambda: _update_rows(records))
    if found is None:
        return judgement
    rows, params, steps = found
    npu_stats, bench_stats = stats
    diffs = np.full((len(rows), 5), np.nan)
    carried = np.full((len(rows), 5), np.nan)
    with np.errstate(invalid="ignore"):
        diffs[:, :4] = npu_stats[rows] - bench_stats[rows]
        carried[:, :4] = npu_stats[params] - bench_stats[params]
    if tensor_error is not None:
        diffs[:, 4], carried[:, 4] = tensor_error[rows], tensor_error[params]
    scores = judgement.scores.copy()
    scores[rows] = update_scores(scores[rows], judgement.allowed[rows], diffs, carried, steps, numel[rows])
    with np.errstate(invalid="ignore"):
        ratio = scores / judgement.allowed
    suspicious = judgement.suspicious.copy()
    suspicious[rows] = np.nan_to_num(ratio[rows], nan=0.0).max(axis=1) > 1.0
    worst = judgement.worst.copy()
    judged = rows[worst[rows] >= 0]
    worst[judged] = np.argmax(np.nan_to_num(ratio[judged], nan=-1.0), axis=1)
    return judgement._replace(scores=scores, suspicious=suspicious, worst=worst)


UNINITIALIZED_APIS = frozenset({"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"})


def _allocation_rows(records):
    roles = records.roles
    return [row for row, parsed in enumerate(records.parsed)
            if parsed is not None and not parsed.is_module and parsed.api in UNINITIALIZED_APIS and roles[row] == "output"]


def _uninitialized_rows(records):
    """Rows holding memory no call has written yet: outputs of torch.empty-like allocations, and later
    input rows holding the same tensor (the same statistics on both sides) before a call fills it.
    Their values are whatever the allocator left there: not data, never judged."""
    rows = memoized(records.extra.get("memo"), "allocation rows", lambda: _allocation_rows(records))
    if not rows:
        return np.zeros(0, dtype=np.int64)
    keys = {(tuple(records.npu_stats[r].tolist()), tuple(records.bench_stats[r].tolist())) for r in rows}
    same = [r for r in np.flatnonzero(np.isin(records.roles, ["input", "parameters"])).tolist()
            if (tuple(records.npu_stats[r].tolist()), tuple(records.bench_stats[r].tolist())) in keys]
    return np.asarray(sorted(set(rows) | set(same)), dtype=np.int64)


def _row_structure(npu, bench, bench_index, unmatched_bench, options):
    """What build_records takes from the tables' structure alone (not their statistics)."""
    npu_pos = np.concatenate([np.arange(len(npu), dtype=np.int64), np.full(len(unmatched_bench), -1, np.int64)])
    bench_pos = np.concatenate([np.asarray(bench_index, dtype=np.int64), np.asarray(unmatched_bench, np.int64)])
    rows = len(npu_pos)
    kinds_n, kinds_b = _kinds(npu, npu_pos), _kinds(bench, bench_pos)
    names_n, names_b = npu.columns["name"] if len(npu) else [], bench.columns["name"] if len(bench) else []
    fuzzy = np.array([i >= 0 and j >= 0 and names_n[i] != names_b[j] for i, j in zip(npu_pos, bench_pos)],
                     dtype=bool) if options.fuzzy_match else np.zeros(rows, dtype=bool)
    entries = [npu.columns["entry"][i] if i >= 0 else ("bench-only", row) for row, i in enumerate(npu_pos.tolist())]
    npu_absent = _absent_array(npu, npu_pos)
    return {"npu_pos": npu_pos, "bench_pos": bench_pos, "kinds_n": kinds_n, "kinds_b": kinds_b,
            "reason": _base_reasons(npu, bench, npu_pos, bench_pos, kinds_n, kinds_b), "fuzzy": fuzzy,
            "entry_ids": _entry_ids(entries), "phases": row_phases(entries), "npu_absent": npu_absent,
            "absent": npu_absent | _absent_array(bench, bench_pos)}


def _judging_structure(records, npu, bench, kinds_n, kinds_b):
    """What the judgement takes from the structure alone: epsilons, element counts, equal shapes."""
    shapes_n, shapes_b = records.column("npu", "shape_key"), records.column("bench", "shape_key")
    return {"npu_eps": _side_epsilon(npu, records.npu_pos, kinds_n),
            "bench_eps": _side_epsilon(bench, records.bench_pos, kinds_b),
            "numel": _numel(bench, records.bench_pos),
            "same_shape": np.array([a == b for a, b in zip(shapes_n, shapes_b)], dtype=bool)}


_MEMO_PROPERTIES = ("names", "entries", "parsed", "roles")


def build_records(mode, npu, bench, bench_index, unmatched_bench, options):
    """CompareRecords of NPU rows (in dump order) followed by bench rows no NPU row matched."""
    memo = structure_memo(npu, bench, mode, options)
    made = memoized(memo, "rows", lambda: _row_structure(npu, bench, bench_index, unmatched_bench, options))
    npu_pos, bench_pos, kinds_n, kinds_b = made["npu_pos"], made["bench_pos"], made["kinds_n"], made["kinds_b"]
    rows = len(npu_pos)
    reason = made["reason"].copy()
    detail = [None] * rows
    cross_tool = tools_differ(npu, bench)
    if cross_tool:
        mark_not_comparable(npu, bench, npu_pos, bench_pos, reason, detail)
    npu_stats, bench_stats = _stat_array(npu, npu_pos), _stat_array(bench, bench_pos)
    absent, npu_absent, entry_ids = made["absent"].copy(), made["npu_absent"], made["entry_ids"]
    records = CompareRecords(mode, npu, bench, npu_pos, bench_pos, reason, detail, made["fuzzy"], npu_stats,
                             bench_stats, absent, {}, np.zeros(rows, dtype=object), np.zeros(rows, np.int8),
                             [[]] * rows, [[]] * rows, None, entry_ids, made["phases"])
    if memo is not None:
        records.extra["memo"] = memo
        for name in _MEMO_PROPERTIES:  # cached properties made once per structure
            records.__dict__[name] = memoized(memo, name, lambda name=name: getattr(records, name))
    if mode == MODE_MD5:
        md5_n, md5_b = records.column("npu", "md5"), records.column("bench", "md5")
        matched = (npu_pos >= 0) & (bench_pos >= 0)
        records.verdict = np.array([("pass" if a == b else "Different") if ok else "N/A"
                                    for a, b, ok in zip(md5_n, md5_b, matched)], dtype=object)
        return records
    is_tensor = kinds_n == "tensor"
    # statistics that are the same dtype-extreme fill on both sides (a finfo.min mask) compare as equal
    fills = same_fill(npu_stats, bench_stats)
    npu_stats = np.where(fills, bench_stats, npu_stats)
    # a tensor holding fills (a masked score) has a Mean and Norm made of fill count x fill value, which
    # differ with the dtype of the fill (-65504 in fp16): those two are not judged on such rows
    fill_rows = fills[:, 0] | fills[:, 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        output_relative = np.abs(npu_stats[:, 0] - bench_stats[:, 0]) / np.maximum(0.01, np.abs(bench_stats[:, 0]))
    # a null statistic (empty tensor, mean of a bool tensor) was not computed: it is not a NaN
    nonfinite = is_tensor & ((~np.isfinite(npu_stats[:, 0]) & ~npu_absent[:, 0])
                             | (~np.isfinite(npu_stats[:, 1]) & ~npu_absent[:, 1]))
    roles = records.roles
    tensor_error = tensor_norm = None
    if mode == MODE_TENSOR:
        metrics = _tensor_metrics((npu, bench, npu_pos, bench_pos, reason, detail), options)
        records.verdict = judge.accuracy_verdicts(metrics["cosine"], metrics["max_abs"], reason)
        color, highlights = judge.highlight(entry_ids, roles, nonfinite, np.abs(metrics["max_abs"]), output_relative,
                                            metrics["cosine"], metrics["one_thousandth"], is_tensor)
        tensor_error, tensor_norm = metrics["error_norm"], metrics["bench_norm"]
    else:
        diff, relative = statistics_diffs(npu_stats, bench_stats)
        metrics = {"diff": diff, "relative": relative}
        matched = (npu_pos >= 0) & (bench_pos >= 0)
        records.verdict = judge.statistics_results(relative, matched)
        color, highlights = judge.highlight(entry_ids, roles, nonfinite, np.abs(diff[:, 0]), output_relative,
                                            is_tensor=is_tensor)
    records.metrics = metrics
    judging = memoized(memo, "judging", lambda: _judging_structure(records, npu, bench, kinds_n, kinds_b))
    npu_eps, bench_eps = judging["npu_eps"], judging["bench_eps"]
    unjudged = absent | (fill_rows[:, None] & np.array([False, False, True, True]))
    unjudged[:, 2] |= unjudged[:, 3]  # a Mean is judged against the magnitude Norm gives (layout.py: Partial rows)
    judged_stats = np.where(unjudged, np.nan, npu_stats), np.where(unjudged, np.nan, bench_stats)
    numel = judging["numel"]
    judgement = judge_rows(judged_stats[0], judged_stats[1], numel, npu_eps, bench_eps,
                           tensor_error, tensor_norm, records.phases, cross_tool=cross_tool)
    judgement = _update_rule(records, judgement, judged_stats, tensor_error, numel)
    garbage = _uninitialized_rows(records)
    if len(garbage):
        judgement.scores[garbage] = np.nan
        judgement.suspicious[garbage] = False
        judgement.worst[garbage] = -1
    compared = ~records.not_compared() & (reason != Reason.SHAPE_MISMATCH)
    compared &= judging["same_shape"] | ~is_tensor
    suspicious = judgement.suspicious & compared
    judgement = judgement._replace(suspicious=suspicious, worst=np.where(compared, judgement.worst, -1))
    records.judgement = judgement
    records.extra["explained"] = explained_epsilons(records, judgement, judged_stats, numel)
    within = (judgement.worst >= 0) & ~suspicious
    records.color, records.highlights, records.overruled = judge.gate_highlights(color, highlights, within)
    for row in garbage.tolist():  # uninitialized memory is no evidence of anything: never coloured
        records.color[row], records.highlights[row] = 0, []
    if cross_tool:  # quantities the two tools record differently (normalise.py): no verdict, no colour
        for row in np.flatnonzero(reason == Reason.CROSS_TOOL).tolist():
            records.color[row], records.highlights[row], records.verdict[row] = 0, [], "N/A"
    return records
