"""accuracy_checking_result/details CSV writer that can resume an interrupted run.

Each finished API is appended as its details rows, then its result row, and flushed; a run killed at
any moment therefore leaves complete rows plus at most one partial line. Resuming (`-csv_path`) drops
the partial line and any details rows whose result row is missing, then appends the remaining APIs.
"""
import csv
import io
import os
import re
import time
from dataclasses import dataclass

from msprobe.core.csv_cells import SafeCsvWriter
from msprobe.core.errors import ParseError, PathError
from msprobe.core.log import logger
from msprobe.core.naming import parse_row_name
from msprobe.core.paths import atomic_write_text, check_path, make_dir
from msprobe.core.precision.columns import (DETAIL_KEYS, MS_DETAIL_COLUMNS, MS_RESULT_COLUMNS, RESULT_COLUMNS,
                                            format_value)
from msprobe.core.precision.output_check import aggregate_status, status_counts

__all__ = ["ReportLayout", "PYTORCH_LAYOUT", "MINDSPORE_LAYOUT", "ResultWriter", "details_path_for"]

_RESULT_NAME = re.compile(r"^accuracy_checking_result_(?P<stamp>\w+)\.csv$")


@dataclass(frozen=True)
class ReportLayout:
    result_columns: tuple
    detail_keys: tuple  # (metric key, column title)


PYTORCH_LAYOUT = ReportLayout(tuple(RESULT_COLUMNS), tuple(DETAIL_KEYS))
_MS_KEYS = ("name", "bench_dtype", "tested_dtype", "shape", "cosine", "max_abs_err", "max_rel_err", "status",
            "message")
MINDSPORE_LAYOUT = ReportLayout(tuple(MS_RESULT_COLUMNS), tuple(zip(_MS_KEYS, MS_DETAIL_COLUMNS)))


def details_path_for(result_path):
    """The details CSV that belongs to an accuracy_checking_result_{ts}.csv."""
    folder, name = os.path.split(result_path)
    match = _RESULT_NAME.match(name)
    if not match:
        raise PathError(f"-csv_path '{result_path}' is not named accuracy_checking_result_{{timestamp}}.csv; "
                        "give the result file of the interrupted run, with its original name.")
    return os.path.join(folder, f"accuracy_checking_details_{match.group('stamp')}.csv")


def _csv_line(cells):
    buffer = io.StringIO()
    SafeCsvWriter(buffer, lineterminator="\n").writerow(cells)
    return buffer.getvalue()


def _complete_rows(path):
    """Rows of a CSV written by this module, leaving out a last line cut short by a kill (which may
    end inside a multi-byte character: the cut is made on bytes, before decoding)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise ParseError(f"-csv_path: cannot read '{path}': {exc.strerror or exc}.") from None
    if data and not data.endswith(b"\n"):
        data = data[: data.rfind(b"\n") + 1]
    try:
        return list(csv.reader(io.StringIO(data.decode("utf-8"))))
    except UnicodeDecodeError:
        raise ParseError(f"-csv_path: '{path}' is not UTF-8 text; give the CSV files of the interrupted run.") from None
    except csv.Error as exc:
        raise ParseError(f"-csv_path: '{path}' is not a readable CSV ({exc}).") from None


def _api_of_row_name(name):
    entry, _ = parse_row_name(name)
    return entry.call_name if entry is not None else name


class ResultWriter:
    """Appends API outcomes to the two CSVs; `done` holds the APIs already written (after a resume)."""

    def __init__(self, out_dir, layout=PYTORCH_LAYOUT, resume_csv=None):
        self.layout = layout
        self.done = set()
        self.statuses = {}  # API -> its verdict (the worse of forward and backward), resumed ones included
        self.messages = {}  # API -> its message
        if resume_csv:
            self.result_path = check_path(resume_csv, kind="file", what="-csv_path")
            self.details_path = details_path_for(self.result_path)
            self._load_previous()
        else:
            out_dir = make_dir(out_dir, what="-o output directory")
            stamp = time.strftime("%Y%m%d%H%M%S")
            self.result_path = os.path.join(out_dir, f"accuracy_checking_result_{stamp}.csv")
            self.details_path = os.path.join(out_dir, f"accuracy_checking_details_{stamp}.csv")
            atomic_write_text(self.result_path, _csv_line(layout.result_columns))
            atomic_write_text(self.details_path, _csv_line([t for _, t in layout.detail_keys]))
        self._result = open(self.result_path, "a", encoding="utf-8", newline="")
        self._details = open(self.details_path, "a", encoding="utf-8", newline="")

    def _load_previous(self):
        if not os.path.isfile(self.details_path):
            raise PathError(f"-csv_path: the details file '{self.details_path}' of the interrupted run is missing.")
        results = _complete_rows(self.result_path)
        if not results or list(results[0]) != list(self.layout.result_columns):
            raise PathError(f"-csv_path '{self.result_path}' is not a run_ut result file of this framework.")
        self.done = {row[0] for row in results[1:] if row}
        self.statuses = {row[0]: aggregate_status(row[1:3]) for row in results[1:] if row}
        self.messages = {row[0]: row[3] if len(row) > 3 else "" for row in results[1:] if row}
        details = _complete_rows(self.details_path)
        if not details or list(details[0]) != [title for _, title in self.layout.detail_keys]:
            raise PathError(f"-csv_path: '{self.details_path}' is not the details file of a run_ut of this framework.")
        kept = [details[0]] + [row for row in details[1:] if row and _api_of_row_name(row[0]) in self.done]
        atomic_write_text(self.result_path, "".join(_csv_line(row) for row in results))
        atomic_write_text(self.details_path, "".join(_csv_line(row) for row in kept))
        logger.info("resume: %d APIs already checked in %s", len(self.done), self.result_path)

    def write(self, outcome):
        """Append one API outcome: {'api', 'forward', 'backward', 'message', 'details': [row dicts]}."""
        keys = [key for key, _ in self.layout.detail_keys]
        self._details.write("".join(_csv_line([format_value(row.get(k)) for k in keys])
                                    for row in outcome["details"]))
        self._details.flush()
        self._result.write(_csv_line([outcome["api"], outcome["forward"], outcome.get("backward", ""),
                                      outcome.get("message", "")]))
        self._result.flush()
        self.done.add(outcome["api"])
        self.statuses[outcome["api"]] = aggregate_status([outcome["forward"], outcome.get("backward", "")])
        self.messages[outcome["api"]] = outcome.get("message", "")

    def summary(self):
        """'N APIs: P pass, W warning, E error, S skipped' over every API in the result file."""
        return f"{len(self.statuses)} APIs: {status_counts(self.statuses.values())}"

    def close(self):
        for handle in (self._result, self._details):
            handle.close()
        for path in (self.result_path, self.details_path):
            os.chmod(path, 0o640)
