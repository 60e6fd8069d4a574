"""Render compare records as text: report cells and markers, Err_message, Suspicion, summary lines.

The one place that turns numbers and reason codes (`records`) into what people read; the xlsx/csv
report, the advisor and the terminal summary all take their text from here. `CompareResult` is the
report table: `header`, `columns` (name -> cells: float, int, str or None for an empty cell), `color`
(0 none, 1 yellow, 2 red per row) and `row_styles` (color, plus 3 on the advisor's suspect row).
"""
from dataclasses import dataclass, field
from itertools import compress
from typing import Optional

import numpy as np

from msprobe.core.compare.columns import NumberColumn
from msprobe.core.io.float_text import joined_reprs
from msprobe.core.compare.judge import RED_MESSAGES, YELLOW_MESSAGES
from msprobe.core.io.load import MODE_MD5, MODE_STATISTICS, MODE_TENSOR
from msprobe.core.compare.metrics import (EXTENSION_METRICS, MSG_EMPTY, MSG_NAN_POSITION, MSG_SHAPE, MSG_ZERO_DIM, NA,
                                          NONE, REFERENCE_METRICS, SHAPE_UNMATCHED, TENSOR_METRIC_TABLE, UNSUPPORTED)
from msprobe.core.compare.reasons import Reason, reason_in
from msprobe.core.compare.memo import memoized
from msprobe.core.compare.records import FLOAT_DTYPES
from msprobe.core.compare.tolerance import AMPLIFICATION, CHECKS, epsilon_name

__all__ = ["CompareResult", "render_result", "headers_for", "suspicion_text", "tensor_metric_cells",
           "summary_counts", "summary_text", "SUSPECT_STYLE", "UNSUPPORTED", "NA", "NONE", "SHAPE_UNMATCHED"]

SUSPECT_STYLE = 3  # added to the row colour: bold text marks the advisor's suspect in the xlsx
COMMON = ["NPU Name", "Bench Name", "NPU Dtype", "Bench Dtype", "NPU Tensor Shape", "Bench Tensor Shape"]
SUMMARY = ["NPU max", "NPU min", "NPU mean", "NPU l2norm", "Bench max", "Bench min", "Bench mean", "Bench l2norm"]
# the tensor metrics' columns: 1.2.1's where 1.2.1 puts them, added ones after 1.2.1's columns
TENSOR_METRICS = [m.header for m in REFERENCE_METRICS]
ADDED_METRICS = [m.header for m in EXTENSION_METRICS]
STAT_DIFFS = ["Max diff", "Min diff", "Mean diff", "L2norm diff"]
STAT_RELATIVE = ["MaxRelativeErr", "MinRelativeErr", "MeanRelativeErr", "NormRelativeErr"]
STACK = "NPU_Stack_Info"
SUSPICION = "Suspicion"

MSG_NO_BENCH = "No bench data matched."
MSG_NO_NPU = "No NPU data matched."
MSG_FUZZY = "Fuzzy matching data, the comparison accuracy may be affected."
MSG_STAT_WARNING = "Need double check api accuracy."
MSG_VALUE_DIFF = "The NPU and bench values differ."
MSG_SHAPE_STATISTICS = "Shape of NPU and bench Tensor do not match."
MSG_DTYPE = "Dtype of NPU and bench Tensor do not match."


def headers_for(mode, with_stack):
    """1.2.1's columns of the mode, then Suspicion (the dtype-aware judgement) last."""
    stack = [STACK] if with_stack else []
    if mode == MODE_TENSOR:
        return (COMMON + TENSOR_METRICS + SUMMARY + ["Accuracy Reached or Not", "Err_message"] + stack
                + ["Data_name"] + ADDED_METRICS + [SUSPICION])
    if mode == MODE_STATISTICS:
        return COMMON + STAT_DIFFS + STAT_RELATIVE + SUMMARY + ["Result", "Err_message"] + stack + [SUSPICION]
    return COMMON + ["NPU MD5", "BENCH MD5", "Result"] + stack


@dataclass
class CompareResult:
    mode: str
    header: list
    columns: dict
    color: np.ndarray
    npu_path: str = ""
    bench_path: str = ""
    row_styles: Optional[np.ndarray] = None
    extra: dict = field(default_factory=dict)

    def __len__(self):
        return len(self.columns[self.header[0]])

    def rows(self):
        """Rows as lists in header order (for tests and small reports)."""
        return [list(r) for r in zip(*(self.columns[h] for h in self.header))]


# the marker every tensor-metric cell of a row shows for its reason code (OK: the numbers; other codes: 'None')
_REASON_MARKERS = {Reason.NAN_POSITION: NA, Reason.NO_BENCH: NA, Reason.NO_NPU: NA,
                   Reason.SHAPE_MISMATCH: SHAPE_UNMATCHED, Reason.NON_TENSOR: UNSUPPORTED,
                   Reason.VALUE_DIFF: UNSUPPORTED, Reason.BENCH_NONE: UNSUPPORTED}
# a 0-d tensor keeps the numbers of the metrics it has (TensorMetric.zero_dim)
_ZERO_DIM_MARKERS = tuple(None if m.zero_dim else UNSUPPORTED for m in TENSOR_METRIC_TABLE)


def tensor_metric_cells(values, reason):
    """The tensor-metric cells of one row, in TENSOR_METRIC_TABLE order: numbers, or the marker its reason
    code calls for ('unsupported', 'N/A', 'None', 'shape unmatched')."""
    code = Reason(int(reason))
    if code == Reason.OK:
        return [float(v) for v in values]
    if code == Reason.ZERO_DIM:
        return [float(v) if m is None else m for v, m in zip(values, _ZERO_DIM_MARKERS)]
    return [_REASON_MARKERS.get(code, NONE)] * len(values)


def _dtype_message(npu_dtype, bench_dtype):
    if npu_dtype == bench_dtype or (npu_dtype in FLOAT_DTYPES and bench_dtype in FLOAT_DTYPES):
        return ""
    return MSG_DTYPE


_BASE_MESSAGES = {Reason.NO_BENCH: MSG_NO_BENCH, Reason.NO_NPU: MSG_NO_NPU, Reason.EMPTY: MSG_EMPTY,
                  Reason.SHAPE_MISMATCH: MSG_SHAPE, Reason.NAN_POSITION: MSG_NAN_POSITION,
                  Reason.ZERO_DIM: MSG_ZERO_DIM, Reason.VALUE_DIFF: MSG_VALUE_DIFF, Reason.BENCH_NONE: MSG_NO_BENCH,
                  Reason.BENCH_FILE_MISSING: MSG_NO_BENCH}


def _reason_message(reason, detail):
    if reason in (Reason.NPU_UNREADABLE, Reason.BENCH_UNREADABLE):
        side = "Dump file" if reason == Reason.NPU_UNREADABLE else "Bench dump file"
        return f"{side}: {detail}; the row is not compared."
    if reason == Reason.NPU_FILE_MISSING:
        return f"Dump file: {detail} not found."
    if reason == Reason.FILE_SHAPE:
        return f"Dump file: {detail}; the dump is inconsistent."
    if reason == Reason.CROSS_TOOL:
        return f"Not comparable across tools: {detail}."
    return _BASE_MESSAGES.get(reason, "")


_UNMATCHED_CODES = frozenset({int(Reason.NO_BENCH), int(Reason.NO_NPU)})
_STATISTICS_MESSAGE_CODES = _UNMATCHED_CODES | {int(Reason.CROSS_TOOL)}  # statistics mode says why no numbers
_TENSOR_NOTE_CODES = frozenset(int(code) for code in (
    Reason.OK, Reason.ZERO_DIM, Reason.NAN_POSITION, Reason.SHAPE_MISMATCH, Reason.EMPTY, Reason.FILE_SHAPE,
    Reason.NPU_UNREADABLE, Reason.BENCH_UNREADABLE, Reason.BENCH_FILE_MISSING))


def _err_parts(records):
    """Per row, the Err_message parts that come from the rows' structure: the reason's message and the
    mode's notes (a verdict's warning and the highlight reasons come with the numbers)."""
    reasons, details = records.reason.tolist(), records.detail
    dtypes_n, dtypes_b = records.column("npu", "dtype"), records.column("bench", "dtype")
    tensor_mode = records.mode == MODE_TENSOR
    fuzzy = records.fuzzy.tolist()
    if not tensor_mode:
        kinds_n, kinds_b = records.column("npu", "kind"), records.column("bench", "kind")
        shapes_n, shapes_b = records.column("npu", "shape_key"), records.column("bench", "shape_key")
    rows = []
    for row, code in enumerate(reasons):
        parts = []
        if tensor_mode or code in _STATISTICS_MESSAGE_CODES:
            parts.append(_reason_message(code, details[row]))
        if tensor_mode and code in _TENSOR_NOTE_CODES:
            if fuzzy[row]:
                parts.append(MSG_FUZZY)
            parts.append(_dtype_message(dtypes_n[row], dtypes_b[row]))
        elif not tensor_mode and kinds_n[row] == "tensor" and kinds_b[row] == "tensor":
            if shapes_n[row] != shapes_b[row]:
                parts.append(MSG_SHAPE_STATISTICS)
            parts.append(_dtype_message(dtypes_n[row], dtypes_b[row]))
        rows.append([part for part in parts if part])
    return rows, ["\n".join(parts) or None for parts in rows]


def _err_messages(records):
    """Err_message per row: the reason's message, the mode's notes, then the highlight reasons."""
    parts, plain = memoized(records.extra.get("memo"), "err parts", lambda: _err_parts(records))
    cells = list(plain)
    highlights = records.highlights
    warned = np.flatnonzero(np.asarray(records.verdict, dtype=object) == "Warning").tolist() \
        if records.mode != MODE_TENSOR else []
    for row in sorted(set(warned).union(compress(range(len(highlights)), highlights))):  # rows with marks
        texts = ([MSG_STAT_WARNING] if records.mode != MODE_TENSOR and records.verdict[row] == "Warning" else []) \
            + parts[row] + [(RED_MESSAGES if level == "red" else YELLOW_MESSAGES)[key]
                            for level, key in highlights[row]]
        cells[row] = "\n".join(filter(None, texts)) or None
    return cells


def _float_cells(values, kinds, special_cell, absent=None):
    """A NumberColumn of `values` whose non-tensor rows hold special_cell(i) instead, and whose tensor
    rows without this statistic (`absent`) hold 'N/A'."""
    special = np.flatnonzero(kinds != "tensor").tolist()
    overrides = dict(zip(special, map(special_cell, special)))
    if absent is not None:
        overrides.update(dict.fromkeys(np.flatnonzero(absent & (kinds == "tensor")).tolist(), NA))
    return NumberColumn(values, overrides)


def _summary_cells(records, side, stats):
    """The four summary columns of one side: numbers, and the overrides its rows' structure calls for (made
    once per structure in a job compare)."""
    made = memoized(records.extra.get("memo"), f"summary {side}", lambda: _summary_columns(records, side, stats))
    return [column.with_values(stats[:, k]) for k, column in enumerate(made)]


def _summary_columns(records, side, stats):
    kinds = np.array(records.column(side, "kind", "missing"), dtype=object)
    values = records.column(side, "value", NA)
    table, positions = (records.npu, records.npu_pos) if side == "npu" else (records.bench, records.bench_pos)
    if len(table):
        bits = np.asarray(table.columns["absent"], dtype=np.int64)[np.clip(positions, 0, None)]
    else:
        bits = np.full(len(positions), 15)
    bits = np.where(positions < 0, 15, bits)
    absent = (bits[:, None] >> np.arange(4)) & 1 == 1
    return [_float_cells(stats[:, k], kinds, lambda i: values[i], absent[:, k]) for k in range(4)]


class _Percent:
    """Relative errors as the reference shows them: '12.345678%' (6 decimals, trailing zeros dropped), N/A
    for NaN. A NumberColumn formatter; `key` gives what the text is made of (the rounded percentage), so
    the xlsx writer formats each distinct one once."""

    @staticmethod
    def key(values):
        return np.round(values * 100, 6)

    def __call__(self, values):
        rounded = self.key(values)
        cells = joined_reprs(rounded.reshape(-1, 1), "", "", "%") if len(rounded) else []
        odd = ~np.isfinite(rounded)
        if odd.any():  # NaN shows N/A, an infinity (or a value whose percentage overflows) 'inf%'
            nan = np.isnan(rounded)
            for i in np.flatnonzero(nan).tolist():
                cells[i] = NA
            for i in np.flatnonzero(odd & ~nan).tolist():
                cells[i] = f"{float(rounded[i])}%"
        return cells


_percent = _Percent()


def _statistics_cells(records):
    diff, relative = records.metrics["diff"], records.metrics["relative"]
    made = memoized(records.extra.get("memo"), "statistics columns", lambda: _statistics_columns(records, diff,
                                                                                                 relative))
    return [column.with_values((diff if k < 4 else relative)[:, k % 4]) for k, column in enumerate(made)]


def _statistics_columns(records, diff, relative):
    numeric_kinds = ("tensor", "scalar")
    kinds_n = np.array(records.column("npu", "kind", "missing"), dtype=object)
    kinds_b = np.array(records.column("bench", "kind", "missing"), dtype=object)
    numeric = np.isin(kinds_n, numeric_kinds) & np.isin(kinds_b, numeric_kinds)
    kinds = np.where(numeric, "tensor", "other").astype(object)
    absent = records.absent
    diff_cells = [_float_cells(diff[:, k], kinds, lambda i: NA, absent[:, k]) for k in range(4)]
    rel_cells = [NumberColumn(relative[:, k], {int(i): NA for i in np.flatnonzero(~numeric | absent[:, k])},
                              _percent) for k in range(4)]
    return diff_cells + rel_cells


def _common_columns(records):
    return {"NPU Name": records.column("npu", "name", NA), "Bench Name": records.column("bench", "name", NA),
            "NPU Dtype": records.column("npu", "dtype", NA), "Bench Dtype": records.column("bench", "dtype", NA),
            "NPU Tensor Shape": records.column("npu", "shape", NA),
            "Bench Tensor Shape": records.column("bench", "shape", NA)}


def _memo_stack_cells(records, stacks, memo):
    """_stack_cells, reused while the stacks are the same object (templates.DumpTemplates.stacks)."""
    if memo is None:
        return _stack_cells(records, stacks)
    seen = memo.get("stack cells")
    if seen is None or seen[0] is not stacks:
        seen = memo["stack cells"] = (stacks, _stack_cells(records, stacks))
    return seen[1]


def _stack_cells(records, stacks):
    """Stack text on the first row of each entry, 'None' elsewhere (as the reference does)."""
    entries = records.npu.columns["entry"] if len(records.npu) else []
    seen, cells = set(), []
    for i in records.npu_pos.tolist():
        if i < 0:
            cells.append("None")
            continue
        entry = entries[i]
        cells.append("None" if entry in seen else stacks.get(entry, "None"))
        seen.add(entry)
    return cells


_UNREADABLE_CODES = (int(Reason.NPU_UNREADABLE), int(Reason.BENCH_UNREADABLE), int(Reason.FILE_SHAPE))
_VALUE_DIFF, _NAN_POSITION = int(Reason.VALUE_DIFF), int(Reason.NAN_POSITION)


def _check_text(records, row, check, worst=True):
    """'Norm off by 1.28 bf16 eps (allowed 0.5, 1.00% of the tensor's magnitude): NPU 1.83 vs bench 1.81'."""
    judgement = records.judgement
    score, allowed = float(judgement.scores[row, check]), float(judgement.allowed[row, check])
    eps = float(judgement.eps[row])
    name = CHECKS[check]
    if check == 4:
        error, norm = float(records.metrics["error_norm"][row]), float(records.metrics["bench_norm"][row])
        values = f"||NPU - bench|| / ||bench|| = {error / norm:.3g}" if norm else f"||NPU - bench|| = {error:.3g}"
        name = "values"
    else:
        values = f"NPU {float(records.npu_stats[row, check]):.6g} vs bench {float(records.bench_stats[row, check]):.6g}"
    verb = "differ" if name == "values" else "differs"
    if eps == 0:
        return f"{name} {verb} and integers must match: {values}"
    if score == float("inf"):
        return f"{name} {verb} where the {epsilon_name(eps)} precision explains nothing: {values}"
    share = f", {score * eps:.2%} of the tensor's magnitude" if check < 4 else ""
    return f"{name} off by {score:.3g} {epsilon_name(eps)} eps (allowed {allowed:g}{share}): {values}"


def _over_allowance(records, row):
    """Indices of the checks over their allowance, worst first."""
    judgement = records.judgement
    ratios = (judgement.scores[row] / judgement.allowed[row]).tolist()
    over = [k for k, ratio in enumerate(ratios) if ratio > 1]  # NaN compares False
    return sorted(over, key=lambda k: -ratios[k])


def suspicion_text(records, row, within_note=False, worst_only=False):
    """The dtype-aware judgement of one row in words (every check over its allowance, worst first, or
    only the worst), or None when there is nothing to say; `within_note` also words a passing row."""
    code = int(records.reason[row])
    if code in _UNREADABLE_CODES:
        return f"not compared: {records.detail[row]}"
    if code == _VALUE_DIFF:
        npu, bench = records.npu.columns["value"][records.npu_pos[row]], records.bench.columns["value"][records.bench_pos[row]]
        return f"value differs: NPU {npu}, bench {bench}"
    if code == _NAN_POSITION:
        return "NaN/Inf at different positions"
    judgement = records.judgement
    if judgement is None or judgement.worst[row] < 0:
        return None
    if judgement.suspicious[row]:
        over = _over_allowance(records, row)
        return "; ".join(_check_text(records, row, k) for k in over[:1 if worst_only else None])
    if records.overruled[row] or within_note:
        worst = int(judgement.worst[row])
        score, allowed = judgement.scores[row, worst], judgement.allowed[row, worst]
        text = (f"within {epsilon_name(judgement.eps[row])} tolerance ({CHECKS[worst]} {score:.2g} of {allowed:g} "
                "eps)")
        if records.overruled[row]:
            rules = "; ".join((RED_MESSAGES if lv == "red" else YELLOW_MESSAGES)[key] for lv, key in records.overruled[row])
            # a row may stay red for an absolute rule (NaN/Inf, 1e+10) the judgement does not overrule
            text += (f"; not coloured although: {rules}" if records.color[row] == 0
                     else f"; overruled (the row is coloured for another rule): {rules}")
        return text
    return None


def _suspicion_cells(records):
    """The Suspicion column: the worst check of each row beyond tolerance (the others named), what
    could not be compared, differing values, and relative rules the judgement overruled."""
    cells = [None] * len(records)
    judgement = records.judgement
    rows = set(np.flatnonzero(reason_in(records.reason, _UNREADABLE_CODES + (_VALUE_DIFF, _NAN_POSITION))).tolist())
    if judgement is not None:
        rows.update(np.flatnonzero(judgement.suspicious).tolist())
        rows.update(compress(range(len(records.overruled)), records.overruled))  # rows with overruled rules
    for row in sorted(rows):
        if judgement is not None and judgement.suspicious[row]:
            over = _over_allowance(records, row)
            text = _check_text(records, row, over[0])
            if len(over) > 1:
                text += "; also " + ", ".join("values" if k == 4 else CHECKS[k] for k in over[1:])
            cells[row] = text
        else:
            cells[row] = suspicion_text(records, row)
    return cells


def render_result(records, stacks=None, with_stack=False):
    """The report table (CompareResult) of `records`."""
    mode = records.mode
    header = headers_for(mode, with_stack)
    memo = records.extra.get("memo")
    cols = dict(memoized(memo, "common columns", lambda: _common_columns(records)))
    if with_stack:
        cols[STACK] = _memo_stack_cells(records, stacks or {}, memo)
    styles = records.color.astype(np.int8).copy()
    if records.suspect is not None:
        styles[records.suspect.row] += SUSPECT_STYLE
    if mode == MODE_MD5:
        cols["NPU MD5"] = records.column("npu", "md5", NA)
        cols["BENCH MD5"] = records.column("bench", "md5", NA)
        cols["Result"] = list(records.verdict)
        return CompareResult(mode, header, cols, records.color, records.npu.path, records.bench.path, styles)
    for name, cells in zip(SUMMARY, _summary_cells(records, "npu", records.npu_stats)
                           + _summary_cells(records, "bench", records.bench_stats)):
        cols[name] = cells
    if mode == MODE_TENSOR:
        metrics = records.metrics
        values = np.stack([metrics[m.field] for m in TENSOR_METRIC_TABLE], axis=1)
        cells = [tensor_metric_cells(v, code) for v, code in zip(values.tolist(), records.reason.tolist())]
        for k, metric in enumerate(TENSOR_METRIC_TABLE):
            cols[metric.header] = [row[k] for row in cells]
        cols["Accuracy Reached or Not"] = list(records.verdict)
        cols["Data_name"] = records.column("npu", "data_name", "-1")
    else:
        for name, cells in zip(STAT_DIFFS + STAT_RELATIVE, _statistics_cells(records)):
            cols[name] = cells
        cols["Result"] = [r or None for r in records.verdict]
    cols["Err_message"] = _err_messages(records)
    suspicion = _suspicion_cells(records)
    for row in records.extra.get("amplified", []):
        suspicion[row] += f"; at most {AMPLIFICATION:g}x what the call's inputs carried: amplified rounding, not a cause"
    for row in records.extra.get("consequence", []):
        if suspicion[row]:
            suspicion[row] += "; carries an earlier difference: a consequence"
    if records.suspect is not None:
        row = records.suspect.row
        suspicion[row] = "Advisor's suspect: " + (suspicion[row] or records.suspect.summary)
    cols[SUSPICION] = suspicion
    return CompareResult(mode, header, cols, records.color, records.npu.path, records.bench.path, styles)


def summary_counts(records):
    """{'rows', 'compared', 'red', 'yellow', 'suspicious', 'unreadable', 'unmatched', 'argument_calls' (calls
    made with a differing non-tensor argument), 'structural' (extra, missing or swapped calls or modules)} of one
    compare;
    md5 mode: {'rows', 'compared', 'different', 'same', 'unmatched', 'unreadable'} (no colours there)."""
    not_compared = records.not_compared()
    unmatched = (records.npu_pos < 0) | (records.bench_pos < 0)
    if records.mode == MODE_MD5:
        verdict = np.asarray(records.verdict, dtype=object)
        return {"rows": len(records), "compared": int((~unmatched).sum()), "different": int((verdict == "Different").sum()),
                "same": int((verdict == "pass").sum()), "unmatched": int(unmatched.sum()), "unreadable": 0}
    from msprobe.core.compare.structure import structural_differences

    suspicious = records.judgement.suspicious if records.judgement is not None else np.zeros(len(records), bool)
    differences = structural_differences(records)
    return {"rows": len(records), "compared": int((~not_compared).sum()), "red": int((records.color == 2).sum()),
            "yellow": int((records.color == 1).sum()), "suspicious": int(suspicious.sum()),
            "unreadable": int(records.unreadable().sum()), "unmatched": int(unmatched.sum()),
            "argument_calls": len({d.entry for d in differences if d.kind == "argument"}),
            "structural": sum(d.kind != "argument" for d in differences)}


def summary_text(records, report_path=None):
    """A few lines for the terminal: counts, unreadable rows, the suspect."""
    counts = summary_counts(records)
    if records.mode == MODE_MD5:  # md5 rows are the same or not: no colours, no tolerance
        lines = [f"compare (md5 mode): {counts['rows']} rows, {counts['compared']} compared, {counts['different']} "
                 f"Different, {counts['same']} the same, {counts['unmatched']} without counterpart"]
        if report_path:
            lines.append(f"  report: {report_path}")
        return "\n".join(lines)
    lines = [f"compare ({records.mode} mode): {counts['rows']} rows, {counts['compared']} compared, "
             f"{counts['red']} red, {counts['yellow']} yellow, {counts['suspicious']} beyond dtype tolerance, "
             f"{counts['unmatched']} without counterpart, {counts['unreadable']} unreadable, "
             f"{counts['argument_calls']} calls with differing arguments, {counts['structural']} structural differences"]
    if counts["unreadable"]:
        first = int(np.flatnonzero(records.unreadable())[0])
        lines.append(f"  {counts['unreadable']} rows could not be compared (unreadable tensor files), e.g. "
                     f"{records.names[first]}: {records.detail[first]}")
    if records.mode != MODE_MD5:
        if records.suspect is not None:
            lines.append(f"  suspect: {records.suspect.name} (line {records.suspect.row}): {records.suspect.summary}")
        else:
            lines.append("  suspect: none" + (" among the compared rows" if counts["unreadable"] else ""))
    if report_path:
        lines.append(f"  report: {report_path}")
    return "\n".join(lines)


def print_suspicious_rows(records, suspicion_cells, top=10):
    """The rows beyond dtype tolerance as a rich table (plain ASCII when not a terminal), in report order, the
    advisor's suspect marked; nothing when every row is within tolerance or the mode is md5."""
    if records.mode == MODE_MD5 or records.judgement is None:
        return
    rows = np.flatnonzero(records.judgement.suspicious)
    if not len(rows):
        return
    from msprobe.core.terminal import print_table

    suspect = records.suspect.row if records.suspect is not None else None
    shown = rows[:top]
    colours = {2: "red", 1: "yellow"}
    print_table(f"compare: {len(rows)} rows beyond dtype tolerance" + (f" (first {len(shown)})" if len(shown) < len(rows)
                                                                      else ""),
                ["line", "name", "why", ""],
                [[int(n), records.names[n], " ".join(str(suspicion_cells[n] or "").split())[:110],
                  "suspect" if suspect is not None and int(n) == suspect else ""] for n in shown],
                styles=[colours.get(int(records.color[n])) for n in shown])
