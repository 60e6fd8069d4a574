"""`vc`: compare two directories of tensor files pair by pair and write `batch_compare_{ts}.csv`.

Files are paired by their path relative to each directory. Columns: NPU File Name, Bench File Name, Shape,
Mean, Bench Mean, Md5 Consistency, Max Abs Error, Max Relative Error, Cosine, Message.
"""
import hashlib
import io
import os
import time
from typing import List

import numpy as np

from msprobe.core.csv_cells import SafeCsvWriter
from msprobe.core.errors import ParseError
from msprobe.core.parse.tensor_file import TENSOR_SUFFIXES, read_tensor_file
from msprobe.core.paths import atomic_write_text, check_path, make_dir
from msprobe.core.precision.metrics import cosine_similarity

__all__ = ["COLUMNS", "tensor_files", "batch_compare"]

COLUMNS = ["NPU File Name", "Bench File Name", "Shape", "Mean", "Bench Mean", "Md5 Consistency", "Max Abs Error",
           "Max Relative Error", "Cosine", "Message"]


def tensor_files(directory: str) -> List[str]:
    """Tensor files under `directory`, as sorted relative paths."""
    found = []
    for root, _, names in os.walk(directory):
        found += [os.path.relpath(os.path.join(root, n), directory) for n in names
                  if os.path.splitext(n)[1].lower() in TENSOR_SUFFIXES]
    return sorted(found)


def _md5(array: np.ndarray) -> str:
    return hashlib.md5(np.ascontiguousarray(array).tobytes(), usedforsecurity=False).hexdigest()


def _row(name: str, npu_dir: str, bench_dir: str) -> List[object]:
    bench_path = os.path.join(bench_dir, name)
    if not os.path.isfile(bench_path):
        return [name, "", "", "", "", "", "", "", "", "no file of this name in the bench directory"]
    try:
        npu, bench = read_tensor_file(os.path.join(npu_dir, name)), read_tensor_file(bench_path)
    except ParseError as exc:
        return [name, name, "", "", "", "", "", "", "", str(exc)]
    a, b = npu.array.astype(np.float64), bench.array.astype(np.float64)
    same_md5 = _md5(npu.array) == _md5(bench.array) and npu.dtype == bench.dtype
    if a.shape != b.shape:
        return [name, name, str(list(a.shape)), a.mean() if a.size else "", b.mean() if b.size else "", same_md5,
                "", "", "", f"shape differs from bench {list(b.shape)}"]
    if a.size == 0:
        return [name, name, "[0]", "", "", same_md5, "", "", "", "empty tensor"]
    with np.errstate(invalid="ignore", divide="ignore"):
        diff = np.abs(a - b)
        relative = np.where(diff == 0, 0.0, diff / np.maximum(np.abs(b), np.finfo(np.float32).eps))
    return [name, name, str(list(a.shape)), float(a.mean()), float(b.mean()), same_md5, float(np.nanmax(diff)),
            float(np.nanmax(relative)), cosine_similarity(a, b), ""]


def batch_compare(npu_dir: str, bench_dir: str, output_dir: str) -> str:
    """Compare every tensor file of `npu_dir` with its namesake in `bench_dir`; returns the CSV path."""
    npu_dir = check_path(npu_dir, kind="dir", what="-m")
    bench_dir = check_path(bench_dir, kind="dir", what="-g")
    names = tensor_files(npu_dir)
    if not names:
        raise ParseError(f"no .npy or .pt files under '{npu_dir}'. Ascend kernel dumps must first be converted "
                         "with CANN's msaccucmp (see 'help dc').")
    output_dir = make_dir(output_dir, what="-out")
    buffer = io.StringIO()
    writer = SafeCsvWriter(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)
    writer.writerows(_row(name, npu_dir, bench_dir) for name in names)
    path = os.path.join(output_dir, f"batch_compare_{time.strftime('%Y%m%d%H%M%S')}.csv")
    suffix = 0
    while os.path.exists(path):  # never replace an earlier result
        suffix += 1
        path = os.path.join(output_dir, f"batch_compare_{time.strftime('%Y%m%d%H%M%S')}_{suffix}.csv")
    atomic_write_text(path, buffer.getvalue())
    return path
