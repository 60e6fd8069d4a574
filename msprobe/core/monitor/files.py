"""Small file writers of the monitor outputs: new file then rename (never through a shared link), 0640/0750."""
import csv
import io
import os
import shutil
import tempfile

import numpy as np

from msprobe.core.errors import ParseError
from msprobe.core.paths import DIR_MODE, FILE_MODE, atomic_write_bytes, ensure_dir

__all__ = ["ensure_dir", "write_bytes", "write_csv", "write_npy_folder", "read_csv_rows"]


def write_bytes(path: str, data: bytes) -> None:
    """A new file replacing `path` whole (temporary file, then rename). No fsync: these are diagnostics
    written every step, and the rename already keeps readers from seeing half a file."""
    atomic_write_bytes(path, data, durable=False)


def write_csv(path: str, header: list, rows: list, bom: bool = False, lineterminator: str = "\r\n") -> None:
    """A whole CSV file at once (`bom`: UTF-8 BOM as the reference's grad_probe files have)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator=lineterminator)
    writer.writerow(header)
    writer.writerows(rows)
    write_bytes(path, buffer.getvalue().encode("utf-8-sig" if bom else "utf-8"))


def write_npy_folder(path: str, arrays: list) -> None:
    """A folder of .npy files, [(file name, array)], that appears whole or not at all: the files are written
    straight from the arrays' memory into a new hidden folder beside `path`, which is then renamed to `path`
    (an existing `path` is replaced). One rename per folder instead of one per file."""
    parent = os.path.dirname(os.path.abspath(path))
    ensure_dir(parent)
    tmp = tempfile.mkdtemp(prefix=".tmp_", dir=parent)
    try:
        os.chmod(tmp, DIR_MODE)
        for name, array in arrays:
            # O_EXCL in a folder only we know: nothing can be planted under these names
            descriptor = os.open(os.path.join(tmp, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
            with os.fdopen(descriptor, "wb") as handle:
                np.save(handle, np.ascontiguousarray(array), allow_pickle=False)
        if os.path.lexists(path):
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.remove(path)
        os.rename(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def read_csv_rows(path: str, what: str = "CSV file") -> list:
    """All rows of a CSV file (BOM tolerated) as lists of strings; a file that is not UTF-8 CSV is a ParseError."""
    try:
        with open(path, encoding="utf-8-sig", newline="") as handle:
            return list(csv.reader(handle))
    except UnicodeDecodeError:
        raise ParseError(f"{what} '{path}' is not UTF-8 text; is it the right file?") from None
    except csv.Error as exc:
        raise ParseError(f"{what} '{path}' is not a readable CSV file ({exc}).") from None
