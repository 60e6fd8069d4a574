"""Assemble the report table of one compare: columns per mode, metric cells, verdicts, highlights.

The result is a `CompareResult`: `header` (column names in report order), `columns` (name -> list of
cell values: float, int, str or None for an empty cell) and `color` (0 none, 1 yellow, 2 red per row).
"""
import os
from dataclasses import dataclass, field

import numpy as np

from msprobe.core.compare import judge
from msprobe.core.compare.columns import NumberColumn
from msprobe.core.compare.load import MODE_MD5, MODE_STATISTICS, MODE_TENSOR
from msprobe.core.compare.metrics import MSG_DTYPE, NA, NONE, UNSUPPORTED
from msprobe.core.compare.tensor_io import MSG_NO_BENCH, compare_tensor_files, msg_not_found

__all__ = ["CompareResult", "build_result", "headers_for", "MSG_FUZZY", "MSG_NO_NPU", "MSG_STAT_WARNING"]

COMMON = ["NPU Name", "Bench Name", "NPU Dtype", "Bench Dtype", "NPU Tensor Shape", "Bench Tensor Shape"]
SUMMARY = ["NPU max", "NPU min", "NPU mean", "NPU l2norm", "Bench max", "Bench min", "Bench mean", "Bench l2norm"]
TENSOR_METRICS = ["Cosine", "MaxAbsErr", "MaxRelativeErr", "One Thousandth Err Ratio", "Five Thousandths Err Ratio"]
STAT_DIFFS = ["Max diff", "Min diff", "Mean diff", "L2norm diff"]
STAT_RELATIVE = ["MaxRelativeErr", "MinRelativeErr", "MeanRelativeErr", "NormRelativeErr"]
STACK = "NPU_Stack_Info"
MSG_FUZZY = "Fuzzy matching data, the comparison accuracy may be affected."
MSG_NO_NPU = "No NPU data matched."
MSG_STAT_WARNING = "Need double check api accuracy."
MSG_VALUE_DIFF = "The NPU and bench values differ."
MSG_SHAPE_STATISTICS = "Shape of NPU and bench Tensor do not match."
_FLOAT_DTYPES = {"torch.float32", "torch.float16", "torch.bfloat16", "torch.float64", "Float32", "Float16",
                 "BFloat16", "Float64", "float32", "float16", "bfloat16", "float64"}


def headers_for(mode, with_stack):
    stack = [STACK] if with_stack else []
    if mode == MODE_TENSOR:
        return COMMON + TENSOR_METRICS + SUMMARY + ["Accuracy Reached or Not", "Err_message"] + stack + ["Data_name"]
    if mode == MODE_STATISTICS:
        return COMMON + STAT_DIFFS + STAT_RELATIVE + SUMMARY + ["Result", "Err_message"] + stack
    return COMMON + ["NPU MD5", "BENCH MD5", "Result"] + stack


@dataclass
class CompareResult:
    mode: str
    header: list
    columns: dict
    color: np.ndarray
    npu_path: str = ""
    bench_path: str = ""
    extra: dict = field(default_factory=dict)

    def __len__(self):
        return len(self.columns[self.header[0]])

    def rows(self):
        """Rows as lists in header order (for tests and small reports)."""
        return [list(r) for r in zip(*(self.columns[h] for h in self.header))]


def _take(values, positions, missing):
    return [values[i] if i >= 0 else missing for i in positions]


def _row_kinds(table, positions):
    """Kind of each row's data ('missing' where the side has no row)."""
    pos = np.asarray(positions, dtype=np.int64)
    if len(table) == 0:
        return np.full(len(pos), "missing", dtype=object)
    kinds = np.asarray(table.columns["kind"], dtype=object)[np.clip(pos, 0, None)]
    kinds[pos < 0] = "missing"
    return kinds


def _float_cells(values, kinds, special_cell, absent=None):
    """A NumberColumn of `values` whose non-tensor rows hold special_cell(i) instead, and whose
    tensor rows without this statistic (`absent`) hold 'N/A'."""
    overrides = {int(i): special_cell(i) for i in np.flatnonzero(kinds != "tensor")}
    if absent is not None:
        overrides.update((int(i), NA) for i in np.flatnonzero(absent & (kinds == "tensor")))
    return NumberColumn(values, overrides)


def _summary_cells(table, positions, stats, absent):
    """Max/min/mean/l2norm cells of one side: floats for tensors, the value for scalars and text."""
    kinds = _row_kinds(table, positions)
    values = table.columns["value"]

    def special(i):
        return NA if positions[i] < 0 else values[positions[i]]

    return [_float_cells(stats[:, k], kinds, special, absent[:, k]) for k in range(4)]


def _stat_array(table, positions):
    cols = table.columns
    if len(table) == 0:
        return np.full((len(positions), 4), np.nan)
    array = np.array([cols[s] for s in ("max", "min", "mean", "norm")], dtype=np.float64).T
    pos = np.asarray(positions, dtype=np.int64)
    taken = array[np.clip(pos, 0, None)]
    taken[pos < 0] = np.nan
    return taken


def _absent_array(table, positions):
    """(rows, 4) bools: the dump recorded no max/min/mean/norm (null) for this row, or has no row."""
    pos = np.asarray(positions, dtype=np.int64)
    if len(table) == 0:
        return np.ones((len(pos), 4), dtype=bool)
    bits = np.asarray(table.columns["absent"], dtype=np.int64)[np.clip(pos, 0, None)]
    bits[pos < 0] = 15
    return (bits[:, None] >> np.arange(4)) & 1 == 1


def _stack_cells(npu, positions, stacks):
    """Stack text on the first row of each entry, 'None' elsewhere (as the reference does)."""
    entries = npu.columns["entry"]
    seen, cells = set(), []
    for i in positions:
        if i < 0:
            cells.append("None")
            continue
        entry = entries[i]
        cells.append("None" if entry in seen else stacks.get(entry, "None"))
        seen.add(entry)
    return cells


def _dtype_message(npu_dtype, bench_dtype):
    if npu_dtype == bench_dtype or (npu_dtype in _FLOAT_DTYPES and bench_dtype in _FLOAT_DTYPES):
        return ""
    return MSG_DTYPE


def _tensor_metric_cells(npu, bench, npu_pos, bench_pos, options):
    """Five metric columns and the base error message per row; reads tensor files of matched pairs."""
    n = len(npu_pos)
    metrics = [[NA] * 5 for _ in range(n)]
    messages = [[] for _ in range(n)]
    pairs, pair_rows = [], []
    kinds_n, kinds_b = npu.columns["kind"], bench.columns["kind"]
    names_n, names_b = npu.columns["name"], bench.columns["name"]
    data_n, data_b = npu.columns["data_name"], bench.columns["data_name"]
    for row, (i, j) in enumerate(zip(npu_pos, bench_pos)):
        if i < 0:
            messages[row].append(MSG_NO_NPU)
        elif j < 0:
            messages[row].append(MSG_NO_BENCH)
        elif kinds_n[i] != "tensor" or kinds_b[j] != "tensor":
            metrics[row] = [UNSUPPORTED] * 5
            same = kinds_n[i] == kinds_b[j] and npu.columns["value"][i] == bench.columns["value"][j]
            messages[row].append("" if same else (MSG_NO_BENCH if kinds_b[j] == "none" else MSG_VALUE_DIFF))
        else:
            npu_file = os.path.join(npu.data_dir, data_n[i]) if data_n[i] != "-1" else ""
            bench_file = os.path.join(bench.data_dir, data_b[j]) if data_b[j] != "-1" else ""
            if not npu_file:  # a tensor row without a file name: nothing to read
                metrics[row] = [NONE] * 5
                messages[row].append(msg_not_found(names_n[i]))
                continue
            pairs.append((npu_file, bench_file, npu.columns["shape_key"][i], bench.columns["shape_key"][j]))
            pair_rows.append(row)
            if names_n[i] != names_b[j] and options.fuzzy_match:
                messages[row].append(MSG_FUZZY)
            messages[row].append(_dtype_message(npu.columns["dtype"][i], bench.columns["dtype"][j]))
    for row, result in zip(pair_rows, compare_tensor_files(pairs, options.processes, options.progress)):
        metrics[row] = list(result[:5])
        if result[5] and result[5] not in messages[row]:
            messages[row].insert(0, result[5])
    return [list(col) for col in zip(*metrics)] if n else [[] for _ in range(5)], messages


def _percent(values):
    """Relative errors as the reference shows them: '12.345678%' (6 decimals, trailing zeros dropped)."""
    cells = [f"{v}%" for v in np.round(values * 100, 6).tolist()]
    for i in np.flatnonzero(np.isnan(values)):
        cells[i] = NA
    return cells


def _statistics_cells(npu, bench, npu_pos, bench_pos, npu_stats, bench_stats, absent):
    from msprobe.core.compare.metrics import statistics_diffs

    diff, relative = statistics_diffs(npu_stats, bench_stats)
    numeric_kinds = ("tensor", "scalar")
    numeric = np.isin(_row_kinds(npu, npu_pos), numeric_kinds) & np.isin(_row_kinds(bench, bench_pos), numeric_kinds)
    kinds = np.where(numeric, "tensor", "other").astype(object)
    diff_cells = [_float_cells(diff[:, k], kinds, lambda i: NA, absent[:, k]) for k in range(4)]
    rel_cells = [NumberColumn(relative[:, k], {int(i): NA for i in np.flatnonzero(~numeric | absent[:, k])},
                              _percent) for k in range(4)]
    return diff, relative, numeric, diff_cells, rel_cells


def _statistics_messages(npu, bench, npu_pos, bench_pos, result):
    """Base Err_message per row in statistics mode: the Warning text, no bench row, or a shape/dtype
    mismatch of a matched tensor pair (its statistics are still compared)."""
    kinds_n, kinds_b = npu.columns["kind"], bench.columns["kind"]
    shapes_n, shapes_b = npu.columns["shape_key"], bench.columns["shape_key"]
    dtypes_n, dtypes_b = npu.columns["dtype"], bench.columns["dtype"]
    messages = []
    for i, j, verdict in zip(npu_pos, bench_pos, result):
        row = [MSG_STAT_WARNING] if verdict == "Warning" else []
        if i >= 0 and j < 0:
            row.append(MSG_NO_BENCH)
        elif i < 0:
            row.append(MSG_NO_NPU)
        elif kinds_n[i] == "tensor" and kinds_b[j] == "tensor":
            if shapes_n[i] != shapes_b[j]:
                row.append(MSG_SHAPE_STATISTICS)
            row.append(_dtype_message(dtypes_n[i], dtypes_b[j]))
        messages.append(row)
    return messages


def build_result(mode, npu, bench, bench_index, unmatched_bench, stacks, with_stack, options):
    """The CompareResult of NPU rows (in dump order) followed by bench rows nobody matched."""
    n_npu = len(npu)
    npu_pos = list(range(n_npu)) + [-1] * len(unmatched_bench)
    bench_pos = [int(j) for j in bench_index] + [int(j) for j in unmatched_bench]
    header = headers_for(mode, with_stack)
    cols = {}
    npu_names = _take(npu.columns["name"], npu_pos, NA)
    cols["NPU Name"] = npu_names
    cols["Bench Name"] = _take(bench.columns["name"], bench_pos, NA)
    cols["NPU Dtype"] = _take(npu.columns["dtype"], npu_pos, NA)
    cols["Bench Dtype"] = _take(bench.columns["dtype"], bench_pos, NA)
    cols["NPU Tensor Shape"] = _take(npu.columns["shape"], npu_pos, NA)
    cols["Bench Tensor Shape"] = _take(bench.columns["shape"], bench_pos, NA)
    matched = (np.asarray(npu_pos, dtype=np.int64) >= 0) & (np.asarray(bench_pos, dtype=np.int64) >= 0)
    if with_stack:
        cols[STACK] = _stack_cells(npu, npu_pos, stacks)
    if mode == MODE_MD5:
        cols["NPU MD5"] = _take(npu.columns["md5"], npu_pos, NA)
        cols["BENCH MD5"] = _take(bench.columns["md5"], bench_pos, NA)
        cols["Result"] = [("pass" if a == b else "Different") if ok else NA
                          for a, b, ok in zip(cols["NPU MD5"], cols["BENCH MD5"], matched)]
        return CompareResult(mode, header, cols, np.zeros(len(npu_pos), np.int8), npu.path, bench.path)
    npu_stats, bench_stats = _stat_array(npu, npu_pos), _stat_array(bench, bench_pos)
    npu_absent, bench_absent = _absent_array(npu, npu_pos), _absent_array(bench, bench_pos)
    for name, cells in zip(SUMMARY, _summary_cells(npu, npu_pos, npu_stats, npu_absent)
                           + _summary_cells(bench, bench_pos, bench_stats, bench_absent)):
        cols[name] = cells
    with np.errstate(divide="ignore", invalid="ignore"):
        output_relative = np.abs(npu_stats[:, 0] - bench_stats[:, 0]) / np.maximum(0.01, np.abs(bench_stats[:, 0]))
    kinds = _row_kinds(npu, npu_pos)
    is_tensor = kinds == "tensor"
    # a null statistic (empty tensor, mean of a bool tensor) was not computed: it is not a NaN
    nonfinite = is_tensor & ((~np.isfinite(npu_stats[:, 0]) & ~npu_absent[:, 0])
                             | (~np.isfinite(npu_stats[:, 1]) & ~npu_absent[:, 1]))
    entry_ids = _entry_ids(npu, npu_pos)
    roles = np.array(_take(npu.columns["role"], npu_pos, ""), dtype=object)
    if mode == MODE_TENSOR:
        metric_cols, messages = _tensor_metric_cells(npu, bench, npu_pos, bench_pos, options)
        for name, cells in zip(TENSOR_METRICS, metric_cols):
            cols[name] = cells
        verdicts = judge.accuracy_verdicts(cols["Cosine"], cols["MaxAbsErr"])
        verdicts[~matched] = "None"  # nothing was compared: not a suspect
        cols["Accuracy Reached or Not"] = list(verdicts)
        color, reasons = judge.highlight(entry_ids, roles, nonfinite, np.abs(judge.as_numbers(cols["MaxAbsErr"])),
                                         output_relative, judge.as_numbers(cols["Cosine"]),
                                         judge.as_numbers(cols["One Thousandth Err Ratio"]), is_tensor)
        cols["Data_name"] = _take(npu.columns["data_name"], npu_pos, "-1")
    else:
        diff, relative, numeric, diff_cells, rel_cells = _statistics_cells(
            npu, bench, npu_pos, bench_pos, npu_stats, bench_stats, npu_absent | bench_absent)
        for name, cells in zip(STAT_DIFFS + STAT_RELATIVE, diff_cells + rel_cells):
            cols[name] = cells
        result = judge.statistics_results(relative, matched)
        messages = _statistics_messages(npu, bench, npu_pos, bench_pos, result)
        cols["Result"] = [r or None for r in result]
        color, reasons = judge.highlight(entry_ids, roles, nonfinite, np.abs(diff[:, 0]), output_relative,
                                         is_tensor=is_tensor)
    cols["Err_message"] = [("\n".join(m for m in base + extra if m) or None) if base or extra else None
                           for base, extra in zip(messages, reasons)]
    return CompareResult(mode, header, cols, color, npu.path, bench.path)


def _entry_ids(npu, positions):
    """Integer id per row, shared by the rows of one call; bench-only rows get ids of their own."""
    entries = npu.columns["entry"]
    ids, lookup = np.empty(len(positions), dtype=np.int64), {}
    for row, i in enumerate(positions):
        key = entries[i] if i >= 0 else ("bench-only", row)
        ids[row] = lookup.setdefault(key, len(lookup))
    return ids
