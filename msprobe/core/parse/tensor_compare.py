"""`cn`: element-wise compare of two tensors: error items, top items, all-close, cosine, error ratio.

An element is an error when |left - right| > atol + rtol * |right| (numpy's isclose rule, right being the
golden side). Tensors of different shapes are flattened and the shorter one is padded with zeros, so that
the comparison still shows where they start to differ.
"""
import os
import tempfile
from dataclasses import dataclass
from typing import List, Tuple

import numpy as np

from msprobe.core.errors import ParseError
from msprobe.core.parse.tensor_file import TensorFile, describe
from msprobe.core.terminal import panel_text, table_text
from msprobe.core.precision.metrics import cosine_similarity

__all__ = ["TensorComparison", "compare_tensors", "render_comparison", "save_as_text"]

Row = Tuple[int, float, float, float]


@dataclass
class TensorComparison:
    left: TensorFile
    right: TensorFile
    count: int
    all_close: bool
    cosine: float
    error_ratio: float
    error_rows: List[Row]
    top_rows: List[Row]
    atol: float
    rtol: float
    shapes_differ: bool


def _flat_pair(left: np.ndarray, right: np.ndarray):
    left, right = left.astype(np.float64).reshape(-1), right.astype(np.float64).reshape(-1)
    if left.size != right.size:
        size = max(left.size, right.size)
        left, right = np.pad(left, (0, size - left.size)), np.pad(right, (0, size - right.size))
    return left, right


def compare_tensors(left: TensorFile, right: TensorFile, rows: int = 20, atol: float = 0.001,
                    rtol: float = 0.001) -> TensorComparison:
    """Compare `left` (the data under test) with `right` (the golden data)."""
    a, b = _flat_pair(left.array, right.array)
    with np.errstate(invalid="ignore"):
        diff = np.abs(a - b)
        close = np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
    errors = np.flatnonzero(~close)
    top = range(min(rows, a.size))
    return TensorComparison(
        left=left, right=right, count=int(a.size), all_close=bool(errors.size == 0),
        cosine=cosine_similarity(a, b), error_ratio=float(errors.size / a.size) if a.size else 0.0,
        error_rows=[(int(i), float(a[i]), float(b[i]), float(diff[i])) for i in errors[:rows]],
        top_rows=[(i, float(a[i]), float(b[i]), float(diff[i])) for i in top],
        atol=atol, rtol=rtol, shapes_differ=left.array.shape != right.array.shape)


def _footer(count: int) -> str:
    return f"# end: {count} values"


def _is_complete(target: str, count: int) -> bool:
    """Whether `target` is a whole earlier output: it ends with the footer naming `count` values (a file cut
    short, by a killed process say, does not)."""
    with open(target, "rb") as handle:
        handle.seek(0, os.SEEK_END)
        handle.seek(max(0, handle.tell() - 256))
        tail = handle.read().decode("utf-8", "replace").rstrip("\n").rsplit("\n", 1)[-1]
    return tail == _footer(count)


def save_as_text(tensor: TensorFile) -> str:
    """Write `{file}.txt` beside the tensor file (values flattened, one per line, then an end line); a complete
    one from an earlier run is kept, a partial one rewritten. Written under a temporary name and renamed, so
    no reader sees half a file; a symbolic link in its place is refused."""
    target = tensor.path + ".txt"
    values = tensor.array.reshape(-1)
    if os.path.islink(target):
        raise ParseError(f"'{target}' is a symbolic link; msprobe neither follows nor replaces it: remove it.")
    if os.path.exists(target):
        if not os.path.isfile(target):
            raise ParseError(f"'{target}' exists and is not a file.")
        if _is_complete(target, values.size):
            return target
    header = f"{describe(tensor)}\nsource: {tensor.path}"
    if values.dtype.kind == "f" and values.dtype.itemsize < 4:
        values = values.astype(np.float32)
    descriptor, temporary = tempfile.mkstemp(prefix=".tmp_", suffix=".txt", dir=os.path.dirname(target) or ".")
    try:
        os.fchmod(descriptor, 0o640)
        with os.fdopen(descriptor, "w") as handle:
            np.savetxt(handle, values, fmt="%.9g" if values.dtype.kind == "f" else "%d", header=header,
                       footer=_footer(values.size)[2:], comments="# ")
        os.replace(temporary, target)
    except BaseException:
        if os.path.lexists(temporary):
            os.remove(temporary)
        raise
    return target


def render_comparison(result: TensorComparison, text_files=None, styled: bool = False) -> str:
    headers = ("Index", "Left", "Right", "Diff")
    fmt = [(i, f"{a:.9g}", f"{b:.9g}", f"{d:.9g}") for i, a, b, d in result.error_rows]
    top = [(i, f"{a:.9g}", f"{b:.9g}", f"{d:.9g}") for i, a, b, d in result.top_rows]
    lines = []
    for side, tensor in (("Left", result.left), ("Right", result.right)):
        lines += [f"{side}:", f" |- File: {tensor.path}"]
        if text_files:
            lines.append(f" |- TxtFile: {text_files[side]}")
        lines.append(f" |- Spec: {describe(tensor)}")
    if result.shapes_differ:
        lines.append("Shapes differ: both were flattened and the shorter one padded with zeros.")
    lines += [f"NumCnt:   {result.count}", f"AllClose: {result.all_close}", f"CosSim:   {result.cosine:.8g}",
              f"ErrorPer: {result.error_ratio:.8g}  (rl= {result.rtol}, al= {result.atol})"]
    return "\n".join([table_text("Error Item Table", headers, fmt, styled=styled),
                       table_text("Top Item Table", headers, top, styled=styled), panel_text(lines, styled=styled)])
