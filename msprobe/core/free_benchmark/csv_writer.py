"""{dump_path}/free_benchmark.csv: the calls whose perturbed re-run disagreed, appended step by step.

Header (msprobe 1.2.1's, exactly): rank,pert_mode,stage,step,api_name,max_rel,dtype,shape,output_index.
Rows are kept in memory during a step and appended at the step's end (and at exit); a check run that
finds nothing still leaves the file, with its header only. Every rank of a
job appends to the same file under an exclusive lock, so rows and the single header never interleave.
The file is opened without following a link and refused when another name shares it (hard link).
"""
import io
import os
from dataclasses import astuple, dataclass
from typing import List, Optional, Union

from msprobe.core.csv_cells import SafeCsvWriter
from msprobe.core.errors import PathError
from msprobe.core.paths import FILE_MODE, ensure_dir

try:
    import fcntl
except ImportError:  # pragma: no cover - not on Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["FreeBenchmarkRow", "ResultCsv", "CSV_NAME", "HEADER"]

CSV_NAME = "free_benchmark.csv"
HEADER = ("rank", "pert_mode", "stage", "step", "api_name", "max_rel", "dtype", "shape", "output_index")


@dataclass
class FreeBenchmarkRow:
    rank: int
    pert_mode: str
    stage: str
    step: int
    api_name: str
    max_rel: Union[float, str]
    dtype: str
    shape: str
    output_index: Optional[int] = None

    def cells(self) -> list:
        return ["" if value is None else value for value in astuple(self)]


class ResultCsv:
    def __init__(self, dump_path: str) -> None:
        self.path = os.path.join(dump_path, CSV_NAME)
        self.pending: List[FreeBenchmarkRow] = []
        self.written = 0

    def add(self, row: FreeBenchmarkRow) -> None:
        self.pending.append(row)

    def flush(self, header_only: bool = False) -> None:
        """Append the pending rows (header first when the file is new). With `header_only` and no rows,
        the file is still created with its header: an empty result is a result, not a missing file."""
        if not self.pending and not (header_only and not os.path.exists(self.path)):
            return
        rows, self.pending = self.pending, []
        text = io.StringIO()
        writer = SafeCsvWriter(text, lineterminator="\n")
        for row in rows:
            writer.writerow(row.cells())
        ensure_dir(os.path.dirname(os.path.abspath(self.path)))
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
        try:
            fd = os.open(self.path, flags, FILE_MODE)
        except OSError as exc:
            raise PathError(f"free_benchmark: cannot write '{self.path}': {exc.strerror or exc}.") from None
        with os.fdopen(fd, "a", encoding="utf-8", newline="") as handle:
            if fcntl is not None:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            info = os.fstat(handle.fileno())
            if info.st_nlink > 1:
                raise PathError(f"free_benchmark: '{self.path}' has other names (hard links); remove it first.")
            if info.st_size == 0:
                os.fchmod(handle.fileno(), FILE_MODE)
                handle.write(",".join(HEADER) + "\n")
            handle.write(text.getvalue())
            handle.flush()
        self.written += len(rows)
