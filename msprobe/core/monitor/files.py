"""Small file writers of the monitor outputs: new file then rename (never through a shared link), 0640/0750."""
import csv
import io
import os
import shutil
import tempfile

import numpy as np

from msprobe.core.csv_cells import SafeCsvWriter
from msprobe.core.csv_cells import read_csv_rows
from msprobe.core.errors import ParseError
from msprobe.core.log import logger
from msprobe.core.paths import DIR_MODE, FILE_MODE, atomic_write_bytes, ensure_dir

__all__ = ["ensure_dir", "write_bytes", "write_csv", "write_npy_folder", "read_csv_rows", "save_figure",
           "event_writer", "read_csv_table"]


def write_bytes(path: str, data: bytes) -> None:
    """A new file replacing `path` whole (temporary file, then rename). No fsync: these are diagnostics
    written every step, and the rename already keeps readers from seeing half a file."""
    atomic_write_bytes(path, data, durable=False)


def save_figure(fig, path: str, dpi: int) -> None:
    """A matplotlib figure as a PNG file of mode 0640 (savefig alone would leave it to the umask)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    write_bytes(path, buffer.getvalue())


def event_writer(logdir: str):
    """tensorboard's EventFileWriter for `logdir` (made 0750) whose event file is 0640 whatever the umask.

    The writer names its file itself and writes it from a thread later; the file is created here first,
    with our mode, and the writer then opens it for writing and keeps that mode."""
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(ensure_dir(logdir))
    path = getattr(writer, "_file_name", None)
    if path:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT, FILE_MODE)
        try:
            os.fchmod(descriptor, FILE_MODE)
        finally:
            os.close(descriptor)
    return writer


def write_csv(path: str, header: list, rows: list, bom: bool = False, lineterminator: str = "\r\n") -> None:
    """A whole CSV file at once (`bom`: UTF-8 BOM as the reference's grad_probe files have)."""
    buffer = io.StringIO()
    writer = SafeCsvWriter(buffer, lineterminator=lineterminator)
    writer.write_header(header)
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


def read_csv_table(path: str, what: str = "CSV file"):
    """(header, rows) of a CSV file that a run appends to, [] rows for an empty file.

    A kill -9 can leave the last line cut: a line without its newline is left out (the cut is made on bytes,
    so a character cut in two does not matter), as is any row whose cell count is not the header's;
    one warning names the file."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise ParseError(f"{what} '{path}' cannot be read: {exc.strerror}.") from None
    whole = data[:data.rfind(b"\n") + 1]
    try:
        rows = list(csv.reader(io.StringIO(whole.decode("utf-8-sig"), newline="")))
    except UnicodeDecodeError:
        raise ParseError(f"{what} '{path}' is not UTF-8 text; is it the right file?") from None
    except csv.Error as exc:
        raise ParseError(f"{what} '{path}' is not a readable CSV file ({exc}).") from None
    if not rows:
        return [], []
    header = rows[0]
    body = [row for row in rows[1:] if len(row) == len(header)]
    dropped = len(rows) - 1 - len(body) + (1 if len(whole) < len(data) else 0)
    if dropped:
        logger.warning("%s '%s': %d incomplete row(s) left out (a run killed while writing?)", what, path, dropped)
    return header, body
