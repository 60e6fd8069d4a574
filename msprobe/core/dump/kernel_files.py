"""MindSpore's native kernel dump files: their names, bfloat16 `.npy` files and `statistic.csv`.

Framework-free (numpy only): the L2 graph dump, kernel compare and the L2 overflow filter read them.

An iteration directory `rank_{id}/{net}/{graph}/{iteration}/` holds one `.npy` file per kernel
input/output, named `{OpType}.{OpName}.{task}.{stream}.{timestamp}.{input|output}.{slot}.{format}.{dtype}.npy`.
Two things MindSpore does that a plain `np.load` over `os.listdir` gets wrong:

* a file whose name would pass 255 characters is saved as `{random digits}.npy`, and
  `mapping.csv` (`digits.npy,real name`) holds the real name;
* bfloat16 tensors are saved with the dtype descriptor `'<E2'`, which numpy cannot read.

    for path, meta in kernel_files(directory):
        values, stored = read_kernel_array(path)   # stored: the bytes as written (CRC-32 of them)
"""
import ast
import csv
import os
import zlib

import numpy as np

from msprobe.core.csv_cells import SafeCsvWriter
from msprobe.core.dump.array_stats import array_statistics
from msprobe.core.errors import ParseError
from msprobe.core.paths import FILE_MODE

__all__ = ["STAT_FILE", "STAT_HEADER", "MAPPING_FILE", "parse_kernel_file_name", "kernel_files",
           "read_kernel_array", "file_statistics", "write_statistics", "stat_header", "STAT_ITEMS"]

STAT_FILE = "statistic.csv"
MAPPING_FILE = "mapping.csv"
STAT_HEADER = ["Op Type", "Op Name", "Task ID", "Stream ID", "Timestamp", "IO", "Slot", "Data Size",
               "Data Type", "Shape", "Max Value", "Min Value", "Avg Value", "Count", "L2Norm Value"]
#: summary_mode list items (config.json, L2) -> the statistic.csv column each one keeps
STAT_ITEMS = {"max": "Max Value", "min": "Min Value", "mean": "Avg Value", "l2norm": "L2Norm Value"}
_BFLOAT16_DESCRIPTORS = ("<E2", "E2", "|E2", "=E2")


def parse_kernel_file_name(file_name):
    """dict(op_type, op_name, task_id, stream_id, timestamp, io, slot, format, dtype) or None."""
    parts = file_name.split(".")
    if len(parts) < 10 or parts[-1] != "npy" or parts[-5] not in ("input", "output"):
        return None
    return {"op_type": parts[0], "op_name": ".".join(parts[1:-8]), "task_id": parts[-8],
            "stream_id": parts[-7], "timestamp": parts[-6], "io": parts[-5], "slot": parts[-4],
            "format": parts[-3], "dtype": parts[-2]}


def _read_mapping(directory):
    """{file name on disk: real file name} from mapping.csv (empty when there is none)."""
    path = os.path.join(directory, MAPPING_FILE)
    if not os.path.isfile(path):
        return {}
    with open(path, newline="", encoding="utf-8") as handle:
        return {row[0].strip(): row[1].strip() for row in csv.reader(handle) if len(row) >= 2}


def kernel_files(directory):
    """[(path on disk, parsed name)] of the kernel .npy files of one iteration directory, sorted by
    file name; renamed files get their real name from mapping.csv."""
    mapping = _read_mapping(directory)
    found = []
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".npy"):
            continue
        meta = parse_kernel_file_name(mapping.get(name, name))
        if meta is not None:
            found.append((os.path.join(directory, name), meta))
    return found


def _npy_header(handle, path):
    if handle.read(6) != b"\x93NUMPY":
        raise ParseError(f"{path} is not a .npy file; was the kernel dump written with file_format 'bin'?")
    major = handle.read(2)[0]
    length = int.from_bytes(handle.read(2 if major == 1 else 4), "little")
    try:
        return ast.literal_eval(handle.read(length).decode("latin1"))
    except (ValueError, SyntaxError) as exc:
        raise ParseError(f"{path}: corrupt .npy header ({exc}).") from exc


def read_kernel_array(path):
    """(values, stored) of one native .npy file.

    `stored` is the array as written; `values` equals it except for bfloat16, which numpy has no
    type for: `stored` is then its uint16 bit patterns and `values` the same numbers as float32.
    """
    try:
        array = np.load(path, allow_pickle=False)
        return array, array
    except ValueError:
        pass  # not a numpy dtype: bfloat16 is the one MindSpore writes
    with open(path, "rb") as handle:
        header = _npy_header(handle, path)
        if header.get("descr") not in _BFLOAT16_DESCRIPTORS:
            raise ParseError(f"{path}: dtype descriptor {header.get('descr')!r} is neither numpy's nor "
                             "MindSpore's bfloat16 ('<E2'); the file cannot be read.")
        shape = tuple(header.get("shape", ()))
        count = int(np.prod(shape, dtype=np.int64))
        bits = np.fromfile(handle, dtype="<u2", count=count)
    if bits.size != count:
        raise ParseError(f"{path} is truncated: {bits.size} of {count} bfloat16 values.")
    order = "F" if header.get("fortran_order") else "C"
    bits = bits.reshape(shape, order=order)
    values = (bits.astype(np.uint32) << 16).view(np.float32)
    return values, bits


def file_statistics(path):
    """(values, stored, [Max, Min, Mean, Norm]) of one native .npy file (Nones when it is empty)."""
    values, stored = read_kernel_array(path)
    return values, stored, array_statistics(values) or [None] * 4


def _crc32(stored):
    return f"{zlib.crc32(np.ascontiguousarray(stored).tobytes()) & 0xffffffff:08x}"


def stat_header(items=None, want_md5=False):
    """STAT_HEADER keeping only the statistic columns of `items` (None: all), plus "MD5" if wanted."""
    dropped = set() if items is None else {column for item, column in STAT_ITEMS.items() if item not in items}
    return [c for c in STAT_HEADER if c not in dropped] + (["MD5"] if want_md5 else [])


def write_statistics(directory, want_md5=False, items=None):
    """Add the statistics of the .npy files of one iteration directory to its `statistic.csv`
    (columns: `stat_header(items, want_md5)`), then remove the files and mapping.csv.
    Returns the number of rows added."""
    files = kernel_files(directory)
    if not files:
        return 0
    header = stat_header(items, want_md5)
    rows = []
    for path, meta in files:
        values, stored, (high, low, mean, norm) = file_statistics(path)
        fields = {"Op Type": meta["op_type"], "Op Name": meta["op_name"], "Task ID": meta["task_id"],
                  "Stream ID": meta["stream_id"], "Timestamp": meta["timestamp"], "IO": meta["io"],
                  "Slot": meta["slot"], "Data Size": stored.nbytes, "Data Type": meta["dtype"],
                  "Shape": "(" + ",".join(map(str, values.shape)) + ")", "Max Value": high, "Min Value": low,
                  "Avg Value": mean, "Count": values.size, "L2Norm Value": norm}
        if want_md5:
            fields["MD5"] = _crc32(stored)
        rows.append(["" if fields[c] is None else fields[c] for c in header])
    target = os.path.join(directory, STAT_FILE)
    exists = os.path.isfile(target)  # MindSpore may add files to an iteration after a first pass
    with open(target, "a" if exists else "w", newline="", encoding="utf-8") as handle:
        writer = SafeCsvWriter(handle)
        if not exists:
            writer.writerow(header)
        writer.writerows(rows)
    os.chmod(target, FILE_MODE)
    for path, _ in files:
        os.remove(path)
    mapping = os.path.join(directory, MAPPING_FILE)
    if os.path.isfile(mapping):
        os.remove(mapping)
    return len(rows)
