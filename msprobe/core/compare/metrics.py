"""Numerics of compare: per-tensor error metrics (tensor mode) and vectorised statistics diffs.

Text markers used in metric cells (as in the reference reports):
  'unsupported'      metric undefined for this data (0-d tensor cosine, non-tensor values)
  'N/A'              NaN/Inf at different positions on the two sides, or nothing to compare with
  'None'             data missing or empty
  'shape unmatched'  shapes differ
"""
from typing import NamedTuple

import numpy as np

from msprobe.core.compare.reasons import Reason
from msprobe.core.compare.tolerance import same_fill

__all__ = ["TensorMetrics", "tensor_metrics", "statistics_diffs", "UNSUPPORTED", "NA", "NONE",
           "SHAPE_UNMATCHED", "not_compared", "MSG_ZERO_DIM", "MSG_EMPTY", "MSG_SHAPE", "MSG_NAN_POSITION", "MSG_DTYPE"]

UNSUPPORTED, NA, NONE, SHAPE_UNMATCHED = "unsupported", "N/A", "None", "shape unmatched"
MSG_ZERO_DIM = ("This is type of 0-d tensor, can not calculate 'Cosine', 'One Thousandth Err Ratio' and "
                "'Five Thousandths Err Ratio'. ")
MSG_EMPTY = "This is empty data, can not compare."
MSG_SHAPE = "Shape of NPU and bench Tensor do not match. Skipped."
MSG_NAN_POSITION = "The Position of inf or nan in NPU and bench Tensor do not match."
MSG_DTYPE = "Dtype of NPU and bench Tensor do not match."
_DECIMALS = 12
_NAN_VALUE = float("nan")
_FLOAT64_EPS = float(np.finfo(np.float64).eps)


class TensorMetrics(NamedTuple):
    """Tensor-mode metrics of one pair as numbers (NaN: not computed) and the reason code saying why
    (a plain named tuple, so it crosses process boundaries). `error_norm` = ||n - b|| and
    `bench_norm` = ||b|| feed the dtype-aware judgement; `detail` explains an unreadable file."""
    cosine: float
    max_abs: float
    max_rel: float
    one_thousandth: float
    five_thousandths: float
    reason: int = Reason.OK
    detail: str = ""
    error_norm: float = _NAN_VALUE
    bench_norm: float = _NAN_VALUE


def not_compared(reason, detail=""):
    """Metrics of a pair that could not be compared."""
    return TensorMetrics(_NAN_VALUE, _NAN_VALUE, _NAN_VALUE, _NAN_VALUE, _NAN_VALUE, int(reason), detail)


def _round(value):
    return round(float(value), _DECIMALS)


def _work_dtype(npu, bench):
    """float32 for low-precision and float32 data (like the reference), float64 when either side needs it."""
    if npu.dtype == np.float64 or bench.dtype == np.float64 or npu.dtype.kind in "iub" and npu.itemsize > 2:
        return np.float64
    return np.float32


def _nonfinite_mismatch(npu, bench):
    """(mismatch?, finite mask or None): NaN/Inf must sit at the same places with the same values."""
    bad_npu, bad_bench = ~np.isfinite(npu), ~np.isfinite(bench)
    if not bad_npu.any() and not bad_bench.any():
        return False, None
    if not np.array_equal(bad_npu, bad_bench):
        return True, None
    same = np.array_equal(npu[bad_npu], bench[bad_bench], equal_nan=True)
    return (not same), ~bad_npu


_DOT_CHUNK = 1 << 16


def _dot(left, right):
    """Dot product accumulated in float64: exact-ish for small arrays, chunked BLAS for big float32 ones."""
    if left.size <= _DOT_CHUNK or left.dtype != np.float32:
        return float(np.einsum("i,i->", left, right, dtype=np.float64))
    return sum(float(np.dot(left[start:start + _DOT_CHUNK], right[start:start + _DOT_CHUNK]))
               for start in range(0, left.size, _DOT_CHUNK))


def _cosine(npu, bench):
    """(cosine, ||bench||)."""
    dot = _dot(npu, bench)
    norm_n, norm_b = float(np.sqrt(_dot(npu, npu))), float(np.sqrt(_dot(bench, bench)))
    if norm_n == 0.0 and norm_b == 0.0:
        return 1.0, norm_b
    if norm_n == 0.0 or norm_b == 0.0:
        return float("nan"), norm_b
    return _round(min(max(dot / (norm_n * norm_b), -1.0), 1.0)), norm_b


def _finite_metrics(npu, bench):
    """(max_abs, max_rel, one, five, error_norm) of finite flat arrays, with two temporary buffers.

    Relative error is |n - b| / |b|; where b is exactly 0 both values are first shifted by float64's
    epsilon, as the documented formula (and 1.2.1) does, so n = 0.5 against b = 0 counts as 0.5 / 2.2e-16.
    """
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):  # NaN/Inf inputs: the caller's job
        abs_err = np.subtract(npu, bench)
        np.abs(abs_err, out=abs_err)
        error_norm = float(np.sqrt(_dot(abs_err, abs_err)))
        relative = np.abs(bench)
        zeros = relative == 0
        if zeros.any():
            eps = npu.dtype.type(_FLOAT64_EPS)
            relative[zeros] = eps
            abs_err[zeros] = np.abs((npu[zeros] + eps) - eps)
        np.divide(abs_err, relative, out=relative)
        count = relative.size
        one = np.count_nonzero(relative < 0.001) / count
        five = np.count_nonzero(relative < 0.005) / count
        return float(abs_err.max()), float(relative.max()), one, five, error_norm


_FILL_FLOOR = 1.0e4  # below every dtype's largest finite magnitude (fp16: 65504)


def _without_same_fills(npu, bench):
    """Both arrays without the elements where both hold a dtype-extreme fill of the same sign (a mask
    written with finfo(dtype).min in each side's dtype): those agree, whatever their dtypes."""
    fills = same_fill(npu, bench)
    if not fills.any() or fills.all():
        return (npu[:1] * 0, bench[:1] * 0) if fills.all() else (npu, bench)
    return npu[~fills], bench[~fills]


def tensor_metrics(npu, bench):
    """Metrics of two numpy arrays, following the documented definitions (10.accuracy_compare_PyTorch).

    Relative error divides by |bench| (an exact zero in bench shifts both sides by float64's epsilon);
    the error ratios count elements whose relative error is below 0.001 / 0.005. Returns numbers and
    a reason code (SHAPE_MISMATCH, EMPTY, NAN_POSITION, ZERO_DIM or OK); `render` makes the cells.
    """
    if npu.shape != bench.shape:
        return not_compared(Reason.SHAPE_MISMATCH)
    if npu.size == 0:
        return not_compared(Reason.EMPTY)
    work = _work_dtype(npu, bench)
    zero_dim = npu.ndim == 0
    npu = np.ascontiguousarray(npu, dtype=work).reshape(-1)
    bench = np.ascontiguousarray(bench, dtype=work).reshape(-1)
    max_abs, max_rel, one, five, error_norm = _finite_metrics(npu, bench)
    if max_abs >= _FILL_FLOOR and np.isfinite(max_abs):  # maybe finfo.min/max fills spelled in two dtypes
        npu, bench = _without_same_fills(npu, bench)
        max_abs, max_rel, one, five, error_norm = _finite_metrics(npu, bench)
    if not (np.isfinite(max_abs) and np.isfinite(max_rel)):  # NaN/Inf somewhere: the slow, careful path
        mismatch, finite = _nonfinite_mismatch(npu, bench)
        if mismatch:
            return not_compared(Reason.NAN_POSITION)
        if finite is not None:
            npu, bench = npu[finite], bench[finite]
        if npu.size == 0:
            return not_compared(Reason.NAN_POSITION)
        max_abs, max_rel, one, five, error_norm = _finite_metrics(npu, bench)
    if zero_dim:
        return TensorMetrics(_NAN_VALUE, _round(max_abs), _round(max_rel), _NAN_VALUE, _NAN_VALUE, Reason.ZERO_DIM,
                             "", error_norm, abs(float(bench[0])))
    cosine, bench_norm = _cosine(npu, bench)
    return TensorMetrics(cosine, _round(max_abs), _round(max_rel), _round(one), _round(five),
                         Reason.OK, "", error_norm, bench_norm)


def statistics_diffs(npu_stats, bench_stats):
    """Vectorised Max/Min/Mean/Norm diffs (npu - bench) and relative errors |diff| / |bench|.

    Both arguments are float arrays of shape (rows, 4); NaN marks absent values. Relative errors are
    NaN where the bench value is 0 and the diff is not (undefined), 0 where both are 0.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        diff = npu_stats - bench_stats
        relative = np.abs(diff) / np.abs(bench_stats)
    relative[(diff == 0)] = 0.0
    relative[~np.isfinite(relative)] = np.nan
    return diff, relative
