"""Column names of the run_ut and api_precision_compare CSV reports (as msprobe 1.2.1 writes them).

Internal metric keys (English) map to the reference's column titles; readers accept titles with or
without spaces ('ULP 误差最大值' == 'ULP误差最大值') and any case of 'API name'.
"""

__all__ = ["RESULT_COLUMNS", "DETAIL_COLUMNS", "DETAIL_KEYS", "MS_RESULT_COLUMNS", "MS_DETAIL_COLUMNS",
           "COMPARE_RESULT_COLUMNS", "COMPARE_DETAIL_COLUMNS", "normalise_title", "format_value"]

RESULT_COLUMNS = ["API name", "Forward Test Success", "Backward Test Success", "Message"]

# (metric key, column title) of accuracy_checking_details_{ts}.csv, in order
DETAIL_KEYS = [
    ("name", "API name"), ("bench_dtype", "Bench Dtype"), ("tested_dtype", "DEVICE Dtype"), ("shape", "Shape"),
    ("cosine", "余弦相似度"), ("max_abs_err", "最大绝对误差"), ("hundredth", "双百指标"),
    ("thousandth", "双千指标"), ("ten_thousandth", "双万指标"), ("binary_err_rate", "二进制一致错误率"),
    ("error_balance", "误差均衡性"), ("rmse", "均方根误差"), ("small_value_err_ratio", "小值域错误占比"),
    ("rel_err_max", "相对误差最大值"), ("rel_err_mean", "相对误差平均值"), ("inf_nan_err_rate", "inf/nan错误率"),
    ("rel_err_rate", "相对误差错误率"), ("abs_err_rate", "绝对误差错误率"), ("ulp_max", "ULP误差最大值"),
    ("ulp_mean", "ULP误差平均值"), ("ulp_ratio", "ULP误差大于阈值占比"), ("status", "Status"), ("message", "Message"),
]
DETAIL_COLUMNS = [title for _, title in DETAIL_KEYS]

MS_RESULT_COLUMNS = ["API Name", "Forward Test Success", "Backward Test Success", "Message"]
MS_DETAIL_COLUMNS = ["API Name", "Bench Dtype", "Tested Dtype", "Shape", "Cosine", "MaxAbsErr", "MaxRelativeErr",
                     "Status", "Message"]

COMPARE_RESULT_COLUMNS = ["API name", "Forward Test Success", "Backward Test Success", "Message"]
COMPARE_DETAIL_COLUMNS = [
    "API name", "小值域错误比值", "小值域错误判定结果", "均方根误差比值", "均方根误差判定结果", "相对误差最大值比值",
    "相对误差最大值判定结果", "相对误差平均值比值", "相对误差平均值判定结果", "误差均衡性比值", "误差均衡性判定结果",
    "inf/nan错误率", "inf/nan判定结果", "相对误差错误率", "相对误差判定结果", "绝对误差错误率", "绝对误差判定结果",
    "二进制一致错误率", "二进制一致错误率判定结果", "ULP误差平均值", "ULP误差大于阈值占比", "ULP误差大于阈值占比比值",
    "ULP误差判定结果", "双千指标", "双千指标判定结果", "比对结果", "比对算法", "Message",
    # English, after 1.2.1's columns (readers that look columns up by name are unaffected)
    "Result", "Standard",
]


def normalise_title(title):
    """Column title without spaces, 'API Name' and 'API name' alike."""
    title = str(title).replace(" ", "")
    return "APIname" if title.lower() == "apiname" else title


def format_value(value, digits=14):
    """CSV cell text: floats rounded to `digits` decimals, None as empty."""
    if value is None:
        return ""
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return str(value)
        return repr(round(value, digits))
    return str(value)
