"""The new precision standard: judge one output row of the NPU run against the GPU run of the same API.

Inputs are the metric dicts of `output_check.check_output` (or a details-CSV row read back as floats).
Rules (docs 07 §5): benchmark standard compares NPU/GPU ratios (small-value error, RMSE, mean relative
error <= 2, max relative error <= 10; error balance reported only); absolute threshold needs zero
inf/nan, relative and absolute error rates; binary needs a zero error rate; ULP (float16/bfloat16):
share above threshold < 0.001 or not above the GPU's; ULP (float32): mean < 64, share < 0.05, or share
not above the GPU's; thousandth: 双千 > 0.999.
Every standard also passes an NPU that is no worse than the GPU on the metric it judges (a rate not
above the GPU's, 双千 not below it; equal values give ratio 1): the GPU run is the benchmark, so the same
CSV given as -npu and -gpu passes. Without this, a bfloat16 broadcast `mul` backward, which sums in
bfloat16 on every device, was an error of the absolute threshold standard against itself.
"""
import math

from msprobe.core.precision.output_check import ERROR, PASS, SKIP, WARNING
from msprobe.core.precision.standards import (ABSOLUTE_THRESHOLD, BENCHMARK, BINARY, STANDARD_LABELS,
                                             STANDARD_NAMES_EN, THOUSANDTH, ULP)

__all__ = ["ratio", "judge_ratio", "judge_row", "BENCHMARK_LIMITS"]

# metric key -> (column prefix, (pass limit, error limit)); between the two is a warning
BENCHMARK_LIMITS = {
    "small_value_err_ratio": ("小值域错误", (2.0, 2.0)),
    "rmse": ("均方根误差", (2.0, 2.0)),
    "rel_err_max": ("相对误差最大值", (10.0, 10.0)),
    "rel_err_mean": ("相对误差平均值", (2.0, 2.0)),
    "error_balance": ("误差均衡性", (2.0, 2.0)),
}
_NOT_JUDGED = ("error_balance",)  # reported, not part of the verdict (docs 07 §5)
# the checks' names in the Message column: English first, then 1.2.1's column title
CHECK_NAMES_EN = {
    "小值域错误比值": "small-value error ratio NPU/GPU", "均方根误差比值": "RMSE ratio NPU/GPU",
    "相对误差最大值比值": "max relative error ratio NPU/GPU", "相对误差平均值比值": "mean relative error ratio NPU/GPU",
    "误差均衡性比值": "error balance ratio NPU/GPU", "inf/nan错误率": "inf/nan error rate",
    "相对误差错误率": "relative error rate", "绝对误差错误率": "absolute error rate",
    "二进制一致错误率": "binary mismatch rate", "ULP误差": "ULP error", "双千指标": "thousandth ratio",
}


def _missing(value):
    return value is None or math.isnan(value)


def ratio(npu, gpu):
    """npu / gpu: 1.0 when both are equal (0 and inf included) or both not computed, inf when only the
    GPU is exact, NaN when only one side was computed."""
    if _missing(npu) and _missing(gpu):
        return 1.0
    if _missing(npu) or _missing(gpu):
        return float("nan")
    if npu == gpu:
        return 1.0
    if gpu == 0:
        return 1.0 if npu == 0 else float("inf")
    return npu / gpu


def judge_ratio(value, limits):
    """pass when value <= pass limit, warning up to the error limit, error above (NaN: error)."""
    pass_limit, error_limit = limits
    if value <= pass_limit:
        return PASS
    return WARNING if value <= error_limit else ERROR


def _zero_is_pass(value, gpu_value=None):
    """pass for a zero error rate, or one not above the GPU's (the benchmark device does no better)."""
    if value == 0 or (value is not None and gpu_value is not None and value <= gpu_value):
        return PASS
    return ERROR


def _benchmark(npu, gpu, limits):
    cells, failed = {}, []
    for key, (prefix, default_limits) in BENCHMARK_LIMITS.items():
        value = ratio(npu.get(key), gpu.get(key))
        verdict = judge_ratio(value, limits.get(key, default_limits))
        cells[f"{prefix}比值"], cells[f"{prefix}判定结果"] = value, verdict
        if verdict != PASS and key not in _NOT_JUDGED:
            failed.append((verdict, f"{prefix}比值"))
    return cells, failed


def _absolute(npu, gpu):
    cells, failed = {}, []
    for key, title, result in (("inf_nan_err_rate", "inf/nan错误率", "inf/nan判定结果"),
                               ("rel_err_rate", "相对误差错误率", "相对误差判定结果"),
                               ("abs_err_rate", "绝对误差错误率", "绝对误差判定结果")):
        value = npu.get(key)
        verdict = _zero_is_pass(value, gpu.get(key))
        cells[title], cells[result] = value, verdict
        if verdict != PASS:
            failed.append((verdict, title))
    return cells, failed


def _binary(npu, gpu):
    value = npu.get("binary_err_rate")
    verdict = _zero_is_pass(value, gpu.get("binary_err_rate"))
    cells = {"二进制一致错误率": value, "二进制一致错误率判定结果": verdict}
    return cells, [] if verdict == PASS else [(verdict, "二进制一致错误率")]


def _ulp(npu, gpu, dtype_name):
    mean, share, gpu_share = npu.get("ulp_mean"), npu.get("ulp_ratio"), gpu.get("ulp_ratio")
    below_gpu = share is not None and gpu_share is not None and share <= gpu_share
    if dtype_name == "float32":
        ok = (mean is not None and mean < 64) or (share is not None and share < 0.05) or below_gpu
    else:
        ok = (share is not None and share < 0.001) or below_gpu
    verdict = PASS if ok else ERROR
    cells = {"ULP误差平均值": mean, "ULP误差大于阈值占比": share,
             "ULP误差大于阈值占比比值": ratio(share, gpu_share), "ULP误差判定结果": verdict}
    return cells, [] if ok else [(ERROR, "ULP误差")]


def _thousandth(npu, gpu):
    value, gpu_value = npu.get("thousandth"), gpu.get("thousandth")
    ok = value is not None and (value > 0.999 or (gpu_value is not None and value >= gpu_value))
    verdict = PASS if ok else ERROR
    return {"双千指标": value, "双千指标判定结果": verdict}, [] if verdict == PASS else [(ERROR, "双千指标")]


def judge_row(standard, npu, gpu, dtype_name, limits=None):
    """Cells of one api_precision_compare details row (without 'API name'), including '比对结果',
    '比对算法' and 'Message', and their English 'Result' and 'Standard'. `npu`/`gpu` hold metric keys; a
    missing metric counts as not computed."""
    if dtype_name not in ("float16", "bfloat16", "float32"):
        return {"比对结果": SKIP, "比对算法": STANDARD_LABELS[standard], "Result": SKIP,
                "Standard": STANDARD_NAMES_EN[standard],
                "Message": f"dtype {dtype_name} is not judged by the new precision standard"}
    if standard == ABSOLUTE_THRESHOLD:
        cells, failed = _absolute(npu, gpu)
    elif standard == BINARY:
        cells, failed = _binary(npu, gpu)
    elif standard == ULP:
        cells, failed = _ulp(npu, gpu, dtype_name)
    elif standard == THOUSANDTH:
        cells, failed = _thousandth(npu, gpu)
    else:
        cells, failed = _benchmark(npu, gpu, limits or {})
    worst = ERROR if any(v == ERROR for v, _ in failed) else (WARNING if failed else PASS)
    cells["比对结果"] = cells["Result"] = worst
    cells["比对算法"] = STANDARD_LABELS.get(standard, STANDARD_LABELS[BENCHMARK])
    cells["Standard"] = STANDARD_NAMES_EN.get(standard, STANDARD_NAMES_EN[BENCHMARK])
    cells["Message"] = "; ".join(f"{CHECK_NAMES_EN.get(title, title)} ({title}): {verdict}" for verdict, title in failed)
    return cells
