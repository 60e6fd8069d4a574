"""Judge one API output against its benchmark: every details-CSV metric plus pass / warning / error.

Rules (run_ut, "API 预检指标"): cosine <= 0.99 -> error; else max abs error < 0.001 -> pass; else for
float16/bfloat16 the 双百 ratio must exceed 0.99 (error otherwise) and 双千 0.999 (warning otherwise);
for float32/float64 双千 must exceed 0.999 (error) and 双万 0.9999 (warning). Integer and bool outputs
must match exactly (binary error rate 0). A NaN/Inf pattern that differs is an error.
MindSpore run_ut uses `judge_cosine_abs`: pass when cosine > 0.99 and max abs error < 0.0001.
Both rules first pass an output that is zero up to rounding (`zero_up_to_rounding`): there the cosine
is the angle between two rounding noises (the backward of a softmax whose output gradient is the same
along the softmax axis is exactly zero; computed, it is ~1e-7 noise with any cosine).
"""
import numpy as np

from msprobe.core.precision import metrics as m
from msprobe.core.precision.standards import (ABSOLUTE_THRESHOLD, BINARY, ULP, absolute_thresholds,
                                             dtype_short_name, standard_of)

__all__ = ["status_counts", "PASS", "WARNING", "ERROR", "SKIP", "FLOAT_DTYPES", "check_output", "judge_run_ut",
           "judge_cosine_abs", "aggregate_status", "zero_up_to_rounding", "ZERO_MESSAGE"]

PASS, WARNING, ERROR, SKIP = "pass", "warning", "error", "SKIP"
FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
LOW_PRECISION = ("float16", "bfloat16")


ZERO_MESSAGE = "zero up to rounding: every |bench| and |error| within the small-value range; cosine not used"


def zero_up_to_rounding(pair, dtype_name):
    """True when the bench of a FinitePair is zero up to the small-value range of the tested dtype
    (precision standard, "小值域": 2**-20 for float32/float64, 2**-10 for float16/bfloat16) and so
    is every error: such an output has no direction to compare, only its size."""
    limits = m.DTYPE_LIMITS.get(dtype_name)
    if limits is None or not pair.size:
        return False
    small = limits["small_value"]
    return float(pair.abs_bench.max()) <= small and float(pair.diff.max()) <= small


def judge_run_ut(cosine, max_abs, hundredth, thousandth, ten_thousandth, dtype_name):
    """(status, message) of a float output from the run_ut metrics."""
    if not np.isfinite(cosine) or cosine <= 0.99:
        return ERROR, f"cosine similarity {cosine:.6g} <= 0.99"
    if max_abs < 0.001:
        return PASS, ""
    if dtype_name in LOW_PRECISION:
        checks = ((hundredth, 0.99, ERROR, "双百"), (thousandth, 0.999, WARNING, "双千"))
    else:
        checks = ((thousandth, 0.999, ERROR, "双千"), (ten_thousandth, 0.9999, WARNING, "双万"))
    for ratio, limit, status, label in checks:
        if not ratio > limit:
            return status, f"{label} ratio {ratio:.6g} <= {limit}"
    return PASS, ""


def judge_cosine_abs(cosine, max_abs, cosine_limit=0.99, abs_limit=0.0001):
    """MindSpore run_ut rule: (status, message)."""
    if np.isfinite(cosine) and cosine > cosine_limit and max_abs < abs_limit:
        return PASS, ""
    return ERROR, f"cosine {cosine:.6g} (needs > {cosine_limit}), max abs err {max_abs:.6g} (needs < {abs_limit})"


def aggregate_status(statuses):
    """API-level status from its rows: any error -> error, else any warning -> warning, else pass;
    all SKIP -> SKIP; no rows -> '' (no backward)."""
    statuses = [s for s in statuses if s]
    if not statuses:
        return ""
    if all(s == SKIP for s in statuses):
        return SKIP
    for status in (ERROR, WARNING):
        if status in statuses:
            return status
    return PASS


def status_counts(statuses):
    """'N pass, N warning, N error, N skipped' of API-level statuses (every kind named, zeros included)."""
    statuses = list(statuses)
    counts = [(statuses.count(PASS), "pass"), (statuses.count(WARNING), "warning"), (statuses.count(ERROR), "error"),
              (statuses.count(SKIP), "skipped")]
    text = ", ".join(f"{n} {label}" for n, label in counts)
    other = len(statuses) - sum(n for n, _ in counts)
    return text + (f", {other} without a verdict" if other else "")


def _float_metrics(pair, rounded_pair, dtype_name):
    limits = m.DTYPE_LIMITS[dtype_name]
    rel_max, rel_mean = m.normal_relative_error_stats(pair, None, limits["small_value"])
    rel = m.relative_errors(rounded_pair, floor=np.finfo(np.float32).eps)
    return {
        "cosine": m.cosine_similarity(rounded_pair),
        "max_abs_err": m.max_abs_error(rounded_pair),
        "hundredth": m.ratio_within(None, None, 0.01, rel=rel),
        "thousandth": m.ratio_within(None, None, 0.001, rel=rel),
        "ten_thousandth": m.ratio_within(None, None, 0.0001, rel=rel),
        "error_balance": m.error_balance(pair, None, limits["small_value"]),
        "rmse": m.rmse(pair),
        "small_value_err_ratio": m.small_value_error_rate(pair, None, limits["small_value"], limits["small_atol"]),
        "rel_err_max": rel_max,
        "rel_err_mean": rel_mean,
        "max_rel_err": m.max_relative_error(None, None, rel=rel),
    }


def check_output(api_name, tested, bench, tested_dtype, bench_in_tested_dtype=None):
    """All metrics of one output plus 'status' and 'message'.

    tested / bench: array-likes (bench in high precision); tested_dtype: e.g. 'torch.bfloat16';
    bench_in_tested_dtype: the bench rounded to the tested dtype. When given, cosine, max abs error,
    双百/双千/双万 and the binary error rate are measured against it (a correctly rounded result is the
    best an op in that dtype can return); the other metrics always use the high-precision bench.
    Keys absent from the result are not applicable to this output.
    """
    dtype_name = dtype_short_name(tested_dtype)
    tested, bench = np.asarray(tested), np.asarray(bench)
    if tested.shape != bench.shape:
        return {"status": ERROR, "message": f"shape {list(tested.shape)} differs from bench {list(bench.shape)}"}
    if tested.size == 0:
        return {"status": PASS, "message": "empty output"}
    if dtype_name not in FLOAT_DTYPES:
        rate = m.binary_error_rate(tested, bench)
        return {"binary_err_rate": rate, "status": PASS if rate == 0 else ERROR,
                "message": "" if rate == 0 else f"{rate:.6g} of the values differ"}
    pair = m.FinitePair(tested, bench)
    rounded = None if bench_in_tested_dtype is None else np.asarray(bench_in_tested_dtype)
    rounded_pair = pair if rounded is None else m.FinitePair(tested, rounded)
    row = _float_metrics(pair, rounded_pair, dtype_name)
    row["inf_nan_err_rate"] = 0.0 if pair.all_finite else m.inf_nan_error_rate(tested, bench)
    standard = standard_of(api_name)
    thresholds = absolute_thresholds(dtype_name)
    if standard == ABSOLUTE_THRESHOLD and thresholds:
        _, row["rel_err_rate"], row["abs_err_rate"] = m.absolute_threshold_rates(pair, None, **thresholds)
    if standard == ULP:
        row["ulp_max"], row["ulp_mean"], row["ulp_ratio"] = m.ulp_summary(pair, None, dtype_name)
    if standard == BINARY:
        row["binary_err_rate"] = m.binary_error_rate(tested, bench if rounded is None else rounded)
    if row["inf_nan_err_rate"] > 0:
        row["status"], row["message"] = ERROR, f"NaN/Inf differ in {row['inf_nan_err_rate']:.6g} of the values"
    elif not np.isfinite(row["cosine"]):  # nothing finite on either side, and the NaN/Inf agree
        row["status"], row["message"] = PASS, "no finite values; NaN/Inf match"
    elif zero_up_to_rounding(rounded_pair, dtype_name):
        row["status"], row["message"] = PASS, ZERO_MESSAGE
    else:
        row["status"], row["message"] = judge_run_ut(row["cosine"], row["max_abs_err"], row["hundredth"],
                                                     row["thousandth"], row["ten_thousandth"], dtype_name)
    return row
