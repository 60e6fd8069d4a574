"""api_precision_compare: NPU details CSV + GPU details CSV -> the new-standard result and details CSVs.

Usage from code: `compare_details_csvs(npu_csv, gpu_csv, out_dir)` returns the two paths written:
`api_precision_compare_result_{ts}.csv` and `api_precision_compare_details_{ts}.csv`.
"""
import csv
import io
import os
import time

from msprobe.core.csv_cells import SafeCsvWriter
from msprobe.core.errors import ParseError, PathError
from msprobe.core.log import logger
from msprobe.core.naming import parse_row_name
from msprobe.core.paths import atomic_write_text, check_path, make_dir
from msprobe.core.precision.columns import (COMPARE_DETAIL_COLUMNS, COMPARE_RESULT_COLUMNS, DETAIL_KEYS,
                                            format_value, normalise_title)
from msprobe.core.precision.new_standard import judge_row
from msprobe.core.precision.output_check import FLOAT_DTYPES, SKIP, aggregate_status, status_counts
from msprobe.core.precision.standards import BINARY, dtype_short_name, standard_of

__all__ = ["read_details_csv", "compare_rows", "compare_details_csvs", "api_of_row"]

_KEY_BY_TITLE = {normalise_title(title): key for key, title in DETAIL_KEYS}
_TEXT_KEYS = ("name", "bench_dtype", "tested_dtype", "shape", "status", "message")


def _to_number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def read_details_csv(path):
    """Rows of an accuracy_checking_details CSV as dicts of metric keys (numbers as floats, '' as None)."""
    path = check_path(path, kind="file", what="details CSV")
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            return _details_rows(path, csv.reader(handle))
    except UnicodeDecodeError:
        raise ParseError(f"{path}: not UTF-8 text; expected an accuracy_checking_details CSV.") from None
    except csv.Error as exc:
        raise ParseError(f"{path}: not a readable CSV ({exc}); expected an accuracy_checking_details CSV.") from None


def _details_rows(path, reader):
    header = next(reader, None)
    if not header:
        raise ParseError(f"{path}: empty file; expected an accuracy_checking_details CSV.")
    keys = [_KEY_BY_TITLE.get(normalise_title(title)) for title in header]
    if "name" not in keys or "status" not in keys:
        raise ParseError(f"{path}: no 'API name'/'Status' columns; is this an accuracy_checking_details CSV?")
    rows = []
    for cells in reader:
        row = {}
        for key, cell in zip(keys, cells):
            if key:
                row[key] = cell if key in _TEXT_KEYS else _to_number(cell)
        if row.get("name"):
            rows.append(row)
    return rows


def api_of_row(name):
    """'Functional.linear.0.forward.output.1' -> ('Functional.linear.0', 'forward')."""
    entry, _ = parse_row_name(name)
    if entry is None or entry.is_module:
        return name, "forward"
    return entry.call_name, entry.direction


def _compare_one(npu, gpu):
    name = npu["name"]
    dtype_name = dtype_short_name(npu.get("tested_dtype", ""))
    if gpu is None:
        return {"比对结果": SKIP, "Result": SKIP, "Message": "no row of this name in the GPU details CSV"}
    if npu.get("status") == SKIP or gpu.get("status") == SKIP:
        return {"比对结果": SKIP, "Result": SKIP,
                "Message": npu.get("message") or gpu.get("message") or "skipped by run_ut"}
    standard = standard_of(name)
    if dtype_name not in FLOAT_DTYPES:
        standard, dtype_name = BINARY, "float32"  # integers and bools must match exactly
    return judge_row(standard, npu, gpu, dtype_name)


def compare_rows(npu_rows, gpu_rows):
    """(details rows, result rows) as lists of cell lists, in the NPU CSV's order."""
    gpu_by_name = {row["name"]: row for row in gpu_rows}
    details, statuses, messages, order = [], {}, {}, []
    for npu in npu_rows:
        cells = _compare_one(npu, gpu_by_name.get(npu["name"]))
        details.append([npu["name"]] + [format_value(cells.get(title)) for title in COMPARE_DETAIL_COLUMNS[1:]])
        api, direction = api_of_row(npu["name"])
        if api not in statuses:
            order.append(api)
            statuses[api], messages[api] = {"forward": [], "backward": []}, []
        statuses[api][direction].append(cells["比对结果"])
        if cells.get("Message"):
            messages[api].append(f"{npu['name']}: {cells['Message']}")
    results = [[api, aggregate_status(statuses[api]["forward"]), aggregate_status(statuses[api]["backward"]),
                "; ".join(messages[api])] for api in order]
    return details, results


def _write_csv(path, header, rows):
    buffer = io.StringIO()
    writer = SafeCsvWriter(buffer)
    writer.writerow(header)
    writer.writerows(rows)
    try:
        atomic_write_text(path, buffer.getvalue())
    except OSError as exc:
        raise PathError(f"api_precision_compare: cannot write '{path}': {exc.strerror or exc}.") from None


def compare_details_csvs(npu_csv, gpu_csv, out_dir="./"):
    """Run the new precision standard over two details CSVs; return (result_path, details_path)."""
    npu_rows, gpu_rows = read_details_csv(npu_csv), read_details_csv(gpu_csv)
    out_dir = make_dir(out_dir, what="output directory")
    details, results = compare_rows(npu_rows, gpu_rows)
    stamp = time.strftime("%Y%m%d%H%M%S")
    result_path = os.path.join(out_dir, f"api_precision_compare_result_{stamp}.csv")
    details_path = os.path.join(out_dir, f"api_precision_compare_details_{stamp}.csv")
    _write_csv(result_path, COMPARE_RESULT_COLUMNS, results)
    _write_csv(details_path, COMPARE_DETAIL_COLUMNS, details)
    verdicts = [aggregate_status(row[1:3]) for row in results]
    logger.info("api_precision_compare: %d APIs: %s (%d output rows); results in %s and %s", len(results),
                status_counts(verdicts), len(details), result_path, details_path)
    from msprobe.core.run_ut.verdict_table import print_api_verdicts

    print_api_verdicts("api_precision_compare", {row[0]: verdict for row, verdict in zip(results, verdicts)},
                       {row[0]: row[3] for row in results})
    return result_path, details_path
