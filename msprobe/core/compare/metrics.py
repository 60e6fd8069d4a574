"""Numerics of compare: per-tensor error metrics (tensor mode) and vectorised statistics diffs.

Text markers used in metric cells (as in the reference reports):
  'unsupported'      metric undefined for this data (0-d tensor cosine, non-tensor values)
  'N/A'              NaN/Inf at different positions on the two sides, or nothing to compare with
  'None'             data missing or empty
  'shape unmatched'  shapes differ
"""
from typing import NamedTuple

import numpy as np

__all__ = ["TensorMetrics", "tensor_metrics", "statistics_diffs", "UNSUPPORTED", "NA", "NONE",
           "SHAPE_UNMATCHED", "MSG_ZERO_DIM", "MSG_EMPTY", "MSG_SHAPE", "MSG_NAN_POSITION", "MSG_DTYPE"]

UNSUPPORTED, NA, NONE, SHAPE_UNMATCHED = "unsupported", "N/A", "None", "shape unmatched"
MSG_ZERO_DIM = ("This is type of 0-d tensor, can not calculate 'Cosine', 'One Thousandth Err Ratio' and "
                "'Five Thousandths Err Ratio'. ")
MSG_EMPTY = "This is empty data, can not compare."
MSG_SHAPE = "Shape of NPU and bench Tensor do not match. Skipped."
MSG_NAN_POSITION = "The Position of inf or nan in NPU and bench Tensor do not match."
MSG_DTYPE = "Dtype of NPU and bench Tensor do not match."
_DECIMALS = 12


class TensorMetrics(NamedTuple):
    """Tensor-mode metrics of one pair (a plain named tuple, so it crosses process boundaries)."""
    cosine: object
    max_abs: object
    max_rel: object
    one_thousandth: object
    five_thousandths: object
    message: str = ""


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
    dot = _dot(npu, bench)
    norm_n, norm_b = float(np.sqrt(_dot(npu, npu))), float(np.sqrt(_dot(bench, bench)))
    if norm_n == 0.0 and norm_b == 0.0:
        return 1.0
    if norm_n == 0.0 or norm_b == 0.0:
        return float("nan")
    return _round(min(max(dot / (norm_n * norm_b), -1.0), 1.0))


def _finite_metrics(npu, bench, eps):
    """(max_abs, max_rel, one, five) of finite flat arrays, with two temporary buffers."""
    with np.errstate(invalid="ignore", over="ignore"):  # NaN/Inf inputs are handled by the caller
        abs_err = np.subtract(npu, bench)
        np.abs(abs_err, out=abs_err)
        relative = np.abs(bench)
        np.maximum(relative, eps, out=relative)  # zeros (and denormals) divide by the dtype's epsilon
        np.divide(abs_err, relative, out=relative)
        count = relative.size
        one = np.count_nonzero(relative < 0.001) / count
        five = np.count_nonzero(relative < 0.005) / count
        return float(abs_err.max()), float(relative.max()), one, five


def tensor_metrics(npu, bench):
    """Metrics of two numpy arrays of the same shape, following the reference's definitions.

    Relative error divides by |bench| (values below the dtype's epsilon, zeros included, count as
    epsilon); the error ratios count elements whose relative error is below 0.001 / 0.005.
    """
    if npu.shape != bench.shape:
        return TensorMetrics(SHAPE_UNMATCHED, SHAPE_UNMATCHED, SHAPE_UNMATCHED, SHAPE_UNMATCHED,
                             SHAPE_UNMATCHED, MSG_SHAPE)
    if npu.size == 0:
        return TensorMetrics(NONE, NONE, NONE, NONE, NONE, MSG_EMPTY)
    work = _work_dtype(npu, bench)
    zero_dim = npu.ndim == 0
    npu = np.ascontiguousarray(npu, dtype=work).reshape(-1)
    bench = np.ascontiguousarray(bench, dtype=work).reshape(-1)
    eps = np.finfo(work).eps
    max_abs, max_rel, one, five = _finite_metrics(npu, bench, eps)
    if not (np.isfinite(max_abs) and np.isfinite(max_rel)):  # NaN/Inf somewhere: the slow, careful path
        mismatch, finite = _nonfinite_mismatch(npu, bench)
        if mismatch:
            return TensorMetrics(NA, NA, NA, NA, NA, MSG_NAN_POSITION)
        if finite is not None:
            npu, bench = npu[finite], bench[finite]
        if npu.size == 0:
            return TensorMetrics(NA, NA, NA, NA, NA, MSG_NAN_POSITION)
        max_abs, max_rel, one, five = _finite_metrics(npu, bench, eps)
    if zero_dim:
        return TensorMetrics(UNSUPPORTED, _round(max_abs), _round(max_rel), UNSUPPORTED, UNSUPPORTED, MSG_ZERO_DIM)
    return TensorMetrics(_cosine(npu, bench), _round(max_abs), _round(max_rel), _round(one), _round(five), "")


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
