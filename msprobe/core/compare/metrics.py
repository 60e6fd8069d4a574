"""Numerics of compare: per-tensor error metrics (tensor mode) and vectorised statistics diffs.

Text markers used in metric cells (as in the reference reports):
  'unsupported'      metric undefined for this data (0-d tensor cosine, non-tensor values)
  'N/A'              NaN/Inf at different positions on the two sides, or nothing to compare with
  'None'             data missing or empty
  'shape unmatched'  shapes differ
"""
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
_FLOAT_KINDS = {"f"}
_DECIMALS = 12


class TensorMetrics(tuple):
    """(cosine, max_abs_err, max_relative_err, one_thousandth_ratio, five_thousandths_ratio, message)."""
    __slots__ = ()

    def __new__(cls, cosine, max_abs, max_rel, one, five, message=""):
        return super().__new__(cls, (cosine, max_abs, max_rel, one, five, message))


def _round(value):
    return round(float(value), _DECIMALS)


def _work_dtype(npu, bench):
    """float32 for low-precision and float32 data (like the reference), float64 when either side needs it."""
    if npu.dtype == np.float64 or bench.dtype == np.float64 or npu.dtype.kind in "iub" and npu.itemsize > 2:
        return np.float64
    return np.float32


def _nonfinite_mismatch(npu, bench):
    """None when NaN/Inf sit at the same places with the same values, else True; also the finite mask."""
    bad_npu, bad_bench = ~np.isfinite(npu), ~np.isfinite(bench)
    if not bad_npu.any() and not bad_bench.any():
        return False, None
    if not np.array_equal(bad_npu, bad_bench):
        return True, None
    same = np.array_equal(npu[bad_npu], bench[bad_bench], equal_nan=True)
    return (not same), ~bad_npu


def _cosine(npu, bench):
    n64, b64 = npu.astype(np.float64, copy=False), bench.astype(np.float64, copy=False)
    dot = float(np.dot(n64, b64))
    norm_n, norm_b = float(np.sqrt(np.dot(n64, n64))), float(np.sqrt(np.dot(b64, b64)))
    if norm_n == 0.0 and norm_b == 0.0:
        return 1.0
    if norm_n == 0.0 or norm_b == 0.0:
        return float("nan")
    return _round(min(max(dot / (norm_n * norm_b), -1.0), 1.0))


def tensor_metrics(npu, bench):
    """Metrics of two numpy arrays of the same shape, following the reference's definitions.

    Relative error divides by |bench|, with exact zeros replaced by the dtype's epsilon; the error
    ratios count elements whose relative error is below 0.001 / 0.005.
    """
    if npu.shape != bench.shape:
        return TensorMetrics(SHAPE_UNMATCHED, SHAPE_UNMATCHED, SHAPE_UNMATCHED, SHAPE_UNMATCHED,
                             SHAPE_UNMATCHED, MSG_SHAPE)
    if npu.size == 0:
        return TensorMetrics(NONE, NONE, NONE, NONE, NONE, MSG_EMPTY)
    work = _work_dtype(npu, bench)
    zero_dim = npu.ndim == 0
    npu = np.asarray(npu, dtype=work).reshape(-1)
    bench = np.asarray(bench, dtype=work).reshape(-1)
    mismatch, finite = _nonfinite_mismatch(npu, bench)
    if mismatch:
        return TensorMetrics(NA, NA, NA, NA, NA, MSG_NAN_POSITION)
    if finite is not None:
        npu, bench = npu[finite], bench[finite]
        if npu.size == 0:
            return TensorMetrics(NA, NA, NA, NA, NA, MSG_NAN_POSITION)
    abs_err = np.abs(npu - bench)
    denominator = np.abs(bench)
    denominator[denominator == 0] = np.finfo(work).eps
    rel_err = abs_err / denominator
    max_abs, max_rel = _round(abs_err.max()), _round(rel_err.max())
    if zero_dim:
        return TensorMetrics(UNSUPPORTED, max_abs, max_rel, UNSUPPORTED, UNSUPPORTED, MSG_ZERO_DIM)
    count = rel_err.size
    one = float(np.count_nonzero(rel_err < 0.001)) / count
    five = float(np.count_nonzero(rel_err < 0.005)) / count
    return TensorMetrics(_cosine(npu, bench), max_abs, max_rel, _round(one), _round(five), "")


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
