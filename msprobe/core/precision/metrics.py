"""Pure numpy accuracy metrics of a tested output against its high-precision benchmark.

Every function takes `tested` and `bench` as array-likes of the same shape (any numeric dtype; they are
compared in float64) and returns plain Python floats. Conventions shared by all of them:
- elements where either side is NaN/Inf are left out of the numeric metrics; `inf_nan_error_rate`
  counts the ones whose special value differs;
- an empty input gives NaN for metrics that need data and 0.0 for error rates;
- relative error is |tested - bench| / |bench| where |bench| > 0; an exact match counts as 0.
"""
import numpy as np

__all__ = ["as_float64", "finite_pair", "cosine_similarity", "max_abs_error", "relative_errors",
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


def as_float64(values):
    """Flatten to a float64 numpy array (bools and ints included)."""
    return np.asarray(values, dtype=np.float64).reshape(-1)


def finite_pair(tested, bench):
    """(tested, bench) restricted to the positions where both are finite."""
    tested, bench = as_float64(tested), as_float64(bench)
    keep = np.isfinite(tested) & np.isfinite(bench)
    return tested[keep], bench[keep]


def cosine_similarity(tested, bench):
    """Cosine of the angle between the two flattened outputs; 1.0 when they are identical (zeros too)."""
    tested, bench = finite_pair(tested, bench)
    if tested.size == 0:
        return float("nan")
    if np.array_equal(tested, bench):
        return 1.0
    norm = np.linalg.norm(tested) * np.linalg.norm(bench)
    if norm == 0:
        return 0.0
    return float(np.clip(np.dot(tested, bench) / norm, -1.0, 1.0))


def max_abs_error(tested, bench):
    """Largest |tested - bench| over finite positions (0.0 when empty)."""
    tested, bench = finite_pair(tested, bench)
    return float(np.max(np.abs(tested - bench))) if tested.size else 0.0


def relative_errors(tested, bench, floor=0.0):
    """Element-wise |tested - bench| / max(|bench|, floor); exact matches are 0, x/0 is inf."""
    tested, bench = finite_pair(tested, bench)
    diff = np.abs(tested - bench)
    denom = np.maximum(np.abs(bench), floor)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(diff == 0, 0.0, diff / denom)
    return rel


def max_relative_error(tested, bench):
    """Largest relative error, bench values below float32 eps taken as eps (0.0 when empty)."""
    rel = relative_errors(tested, bench, floor=np.finfo(np.float32).eps)
    return float(rel.max()) if rel.size else 0.0


def ratio_within(tested, bench, tolerance):
    """Share of elements whose relative error is <= tolerance: 0.01 -> 双百, 0.001 -> 双千, 0.0001 -> 双万.

    Bench values below float32 eps are taken as eps so that near-zero outputs do not explode."""
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
    tested, bench = finite_pair(tested, bench)
    small = np.abs(bench) < small_value
    count = np.count_nonzero(small)
    if count == 0:
        return 0.0
    return float(np.count_nonzero(np.abs(tested[small] - bench[small]) > small_atol) / count)


def rmse(tested, bench):
    """Root mean squared error over finite elements (0.0 when empty)."""
    tested, bench = finite_pair(tested, bench)
    return float(np.sqrt(np.mean((tested - bench) ** 2))) if tested.size else 0.0


def normal_relative_error_stats(tested, bench, small_value):
    """(max, mean) relative error over elements with |bench| >= small_value; (0, 0) when none."""
    tested, bench = finite_pair(tested, bench)
    normal = np.abs(bench) >= small_value
    if not np.any(normal):
        return 0.0, 0.0
    rel = np.abs(tested[normal] - bench[normal]) / np.abs(bench[normal])
    return float(rel.max()), float(rel.mean())


def error_balance(tested, bench, small_value):
    """|mean signed relative error|: near 0 when errors go both ways, large when biased one way."""
    tested, bench = finite_pair(tested, bench)
    if tested.size == 0:
        return 0.0
    signed = (tested - bench) / np.maximum(np.abs(bench), small_value)
    return float(abs(signed.mean()))


def ulp_errors(tested, bench, dtype_name):
    """|tested - bench| in units in the last place of `dtype_name` at the bench value."""
    limits = DTYPE_LIMITS[dtype_name]
    tested, bench = finite_pair(tested, bench)
    magnitude = np.abs(bench)
    with np.errstate(divide="ignore"):
        exponent = np.floor(np.log2(np.where(magnitude > 0, magnitude, 1.0)))
    exponent = np.where(magnitude > 0, np.maximum(exponent, limits["min_exp"]), limits["min_exp"])
    ulp = np.exp2(exponent - limits["mantissa"])
    return np.abs(tested - bench) / ulp


def ulp_summary(tested, bench, dtype_name):
    """(max ULP error, mean ULP error, share above the dtype's ULP threshold)."""
    errors = ulp_errors(tested, bench, dtype_name)
    if errors.size == 0:
        return 0.0, 0.0, 0.0
    above = np.count_nonzero(errors > DTYPE_LIMITS[dtype_name]["ulp_thr"]) / errors.size
    return float(errors.max()), float(errors.mean()), float(above)


def absolute_threshold_rates(tested, bench, rtol, small_value, small_value_atol):
    """(inf/nan error rate, relative error rate on normal values, absolute error rate on small values)."""
    inf_nan = inf_nan_error_rate(tested, bench)
    tested_f, bench_f = finite_pair(tested, bench)
    small = np.abs(bench_f) < small_value
    diff = np.abs(tested_f - bench_f)
    normal_count, small_count = np.count_nonzero(~small), np.count_nonzero(small)
    rel_rate = 0.0
    if normal_count:
        rel_rate = np.count_nonzero(diff[~small] / np.abs(bench_f[~small]) > rtol) / normal_count
    abs_rate = np.count_nonzero(diff[small] > small_value_atol) / small_count if small_count else 0.0
    return inf_nan, float(rel_rate), float(abs_rate)
