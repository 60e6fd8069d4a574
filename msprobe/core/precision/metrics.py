"""Pure numpy accuracy metrics of a tested output against its high-precision benchmark.

Every function takes `tested` and `bench` as array-likes of the same shape (any numeric dtype; they are
compared in float64) and returns plain Python floats. Conventions shared by all of them:
- elements where either side is NaN/Inf are left out of the numeric metrics; `inf_nan_error_rate`
  counts the ones whose special value differs;
- an empty input gives NaN for metrics that need data and 0.0 for error rates;
- relative error is |tested - bench| / |bench| where |bench| > 0; an exact match counts as 0.
"""
import numpy as np

__all__ = ["as_float64", "finite_pair", "FinitePair", "cosine_similarity", "max_abs_error", "relative_errors",
           "max_relative_error", "ratio_within", "inf_nan_error_rate", "binary_error_rate",
           "small_value_error_rate", "rmse", "normal_relative_error_stats", "error_balance",
           "ulp_errors", "ulp_summary", "absolute_threshold_rates", "DTYPE_LIMITS"]

# small value (|bench| below it) and the absolute error allowed there, per tested dtype (precision
# standard, "小值域阈值"); ULP: mantissa bits, lowest normal exponent, error threshold in ULPs
DTYPE_LIMITS = {
    "float16": {"small_value": 2.0 ** -10, "small_atol": 2.0 ** -16, "mantissa": 10, "min_exp": -14, "ulp_thr": 1},
    "bfloat16": {"small_value": 2.0 ** -10, "small_atol": 2.0 ** -16, "mantissa": 7, "min_exp": -126, "ulp_thr": 1},
    "float32": {"small_value": 2.0 ** -20, "small_atol": 2.0 ** -30, "mantissa": 23, "min_exp": -126, "ulp_thr": 32},
    "float64": {"small_value": 2.0 ** -20, "small_atol": 2.0 ** -30, "mantissa": 52, "min_exp": -1022, "ulp_thr": 32},
}


def _dot(left, right):
    """Sum of products of two float64 vectors. einsum, not BLAS: a BLAS dot splits the sum over as many
    threads as the machine has cores, so its last bits would depend on the machine, and its idle threads
    spin against the other multi_run_ut workers for the shared cores."""
    return float(np.einsum("i,i->", left, right))


def as_float64(values):
    """Flatten to a float64 numpy array (bools and ints included)."""
    return np.asarray(values, dtype=np.float64).reshape(-1)


class FinitePair:
    """The finite positions of one (tested, bench) pair with |diff| and |bench| computed once; every
    metric accepts it in place of the two arrays, so judging an output scans the data a few times only."""

    def __init__(self, tested, bench):
        tested, bench = as_float64(tested), as_float64(bench)
        keep = np.isfinite(tested) & np.isfinite(bench)
        self.all_finite = bool(keep.all())
        self.tested, self.bench = (tested, bench) if self.all_finite else (tested[keep], bench[keep])
        self.diff = np.abs(self.tested - self.bench)
        self.abs_bench = np.abs(self.bench)
        self.size = self.tested.size


def _prepared(tested, bench=None):
    return tested if isinstance(tested, FinitePair) else FinitePair(tested, bench)


def finite_pair(tested, bench=None):
    """(tested, bench) restricted to the positions where both are finite."""
    pair = _prepared(tested, bench)
    return pair.tested, pair.bench


def cosine_similarity(tested, bench=None):
    """Cosine of the angle between the two flattened outputs; 1.0 when they are identical (zeros too)."""
    pair = _prepared(tested, bench)
    tested, bench = pair.tested, pair.bench
    if tested.size == 0:
        return float("nan")
    if not pair.diff.any():
        return 1.0
    norm = np.sqrt(_dot(tested, tested)) * np.sqrt(_dot(bench, bench))
    if norm == 0:
        return 0.0
    return float(np.clip(_dot(tested, bench) / norm, -1.0, 1.0))


def max_abs_error(tested, bench=None):
    """Largest |tested - bench| over finite positions (0.0 when empty)."""
    pair = _prepared(tested, bench)
    return float(pair.diff.max()) if pair.size else 0.0


def relative_errors(tested, bench=None, floor=0.0):
    """Element-wise |tested - bench| / max(|bench|, floor); exact matches are 0, x/0 is inf."""
    pair = _prepared(tested, bench)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = pair.diff / (np.maximum(pair.abs_bench, floor) if floor else pair.abs_bench)
    if not floor:
        rel[pair.diff == 0] = 0.0
    return rel


def max_relative_error(tested, bench=None, rel=None):
    """Largest relative error, bench values below float32 eps taken as eps (0.0 when empty)."""
    if rel is None:
        rel = relative_errors(tested, bench, floor=np.finfo(np.float32).eps)
    return float(rel.max()) if rel.size else 0.0


def ratio_within(tested, bench, tolerance, rel=None):
    """Share of elements whose relative error is <= tolerance: 0.01 -> 双百, 0.001 -> 双千, 0.0001 -> 双万.

    Bench values below float32 eps are taken as eps so that near-zero outputs do not explode;
    `rel` may pass those relative errors when already computed."""
    if rel is None:
        rel = relative_errors(tested, bench, floor=np.finfo(np.float32).eps)
    return float(np.count_nonzero(rel <= tolerance) / rel.size) if rel.size else 1.0


def inf_nan_error_rate(tested, bench):
    """Share of elements where the NaN/Inf pattern differs (NaN vs NaN and equal Infs agree)."""
    tested, bench = as_float64(tested), as_float64(bench)
    if tested.size == 0:
        return 0.0
    special = ~np.isfinite(tested) | ~np.isfinite(bench)
    agree = (np.isnan(tested) & np.isnan(bench)) | (np.isinf(tested) & (tested == bench))
    return float(np.count_nonzero(special & ~agree) / tested.size)


def binary_error_rate(tested, bench):
    """Share of elements that are not bit-for-bit equal in value (NaN equals NaN)."""
    tested, bench = as_float64(tested), as_float64(bench)
    if tested.size == 0:
        return 0.0
    equal = (tested == bench) | (np.isnan(tested) & np.isnan(bench))
    return float(np.count_nonzero(~equal) / tested.size)


def small_value_error_rate(tested, bench, small_value, small_atol):
    """Among elements with |bench| < small_value, the share whose abs error exceeds small_atol."""
    pair = _prepared(tested, bench)
    small = pair.abs_bench < small_value
    count = np.count_nonzero(small)
    if count == 0:
        return 0.0
    return float(np.count_nonzero(pair.diff[small] > small_atol) / count)


def rmse(tested, bench=None):
    """Root mean squared error over finite elements (0.0 when empty)."""
    pair = _prepared(tested, bench)
    return float(np.sqrt(_dot(pair.diff, pair.diff) / pair.size)) if pair.size else 0.0


def normal_relative_error_stats(tested, bench, small_value):
    """(max, mean) relative error over elements with |bench| >= small_value; (0, 0) when none."""
    pair = _prepared(tested, bench)
    normal = pair.abs_bench >= small_value
    if not np.any(normal):
        return 0.0, 0.0
    rel = pair.diff[normal] / pair.abs_bench[normal]
    return float(rel.max()), float(rel.mean())


def error_balance(tested, bench, small_value):
    """|mean signed relative error|: near 0 when errors go both ways, large when biased one way."""
    pair = _prepared(tested, bench)
    if pair.size == 0:
        return 0.0
    signed = (pair.tested - pair.bench) / np.maximum(pair.abs_bench, small_value)
    return float(abs(signed.mean()))


def ulp_errors(tested, bench, dtype_name):
    """|tested - bench| in units in the last place of `dtype_name` at the bench value."""
    limits = DTYPE_LIMITS[dtype_name]
    pair = _prepared(tested, bench)
    magnitude = pair.abs_bench
    with np.errstate(divide="ignore"):
        exponent = np.floor(np.log2(np.where(magnitude > 0, magnitude, 1.0)))
    exponent = np.where(magnitude > 0, np.maximum(exponent, limits["min_exp"]), limits["min_exp"])
    ulp = np.exp2(exponent - limits["mantissa"])
    return pair.diff / ulp


def ulp_summary(tested, bench, dtype_name):
    """(max ULP error, mean ULP error, share above the dtype's ULP threshold)."""
    errors = ulp_errors(tested, bench, dtype_name)
    if errors.size == 0:
        return 0.0, 0.0, 0.0
    above = np.count_nonzero(errors > DTYPE_LIMITS[dtype_name]["ulp_thr"]) / errors.size
    return float(errors.max()), float(errors.mean()), float(above)


def absolute_threshold_rates(tested, bench, rtol, small_value, small_value_atol):
    """(inf/nan error rate, relative error rate on normal values, absolute error rate on small values)."""
    inf_nan = inf_nan_error_rate(tested, bench) if not isinstance(tested, FinitePair) else None
    pair = _prepared(tested, bench)
    small = pair.abs_bench < small_value
    diff = pair.diff
    normal_count, small_count = np.count_nonzero(~small), np.count_nonzero(small)
    rel_rate = 0.0
    if normal_count:
        rel_rate = np.count_nonzero(diff[~small] > rtol * pair.abs_bench[~small]) / normal_count
    abs_rate = np.count_nonzero(diff[small] > small_value_atol) / small_count if small_count else 0.0
    return inf_nan, float(rel_rate), float(abs_rate)
