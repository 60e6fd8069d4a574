"""Which precision standard judges an API, and the per-dtype thresholds of the absolute-threshold standard.

The API lists are those of msprobe 1.2.1's precision standard (the doc data file
api_precision_standard.yaml); every API not listed is judged with the benchmark standard.
"""
from msprobe.core.naming import parse_call_name

__all__ = ["BENCHMARK", "ABSOLUTE_THRESHOLD", "BINARY", "ULP", "THOUSANDTH", "STANDARD_LABELS", "STANDARD_NAMES_EN",
           "standard_of", "absolute_thresholds", "bare_api_name", "dtype_short_name"]

BENCHMARK, ABSOLUTE_THRESHOLD, BINARY, ULP, THOUSANDTH = (
    "benchmark", "absolute_threshold", "binary", "ulp", "thousandth")

# the report writes the standard's Chinese name, as the reference does
STANDARD_LABELS = {BENCHMARK: "标杆比对法", ABSOLUTE_THRESHOLD: "绝对阈值法", BINARY: "二进制一致法",
                   ULP: "ULP误差比对法", THOUSANDTH: "双千指标法"}

STANDARD_NAMES_EN = {BENCHMARK: "benchmark (NPU/GPU error ratios)", ABSOLUTE_THRESHOLD: "absolute threshold",
                     BINARY: "binary consistency", ULP: "ULP error", THOUSANDTH: "thousandth ratio"}

_APIS = {
    ABSOLUTE_THRESHOLD: (
        "mul mul_ __mul__ __imul__ __rmul__ add add_ __add__ __iadd__ __radd__ div div_ __div__ __idiv__ "
        "divide divide_ leaky_relu leaky_relu_ prelu reciprocal reciprocal_ rsqrt rsqrt_ square square_ "
        "sub sub_ rsub __isub__ __sub__"),
    BINARY: (
        "abs abs_ absolute absolute_ argmin bitwise_and bitwise_and_ broadcast_to ceil ceil_ equal fill_ "
        "flatten floor floor_ gather greater greater_ greater_equal greater_equal_ histc isfinite isnan less "
        "less_ less_equal less_equal_ logical_and logical_and_ logical_not logical_not_ logical_or "
        "logical_or_ masked_fill masked_fill_ max_pool3d maximum minimum neg neg_ nonzero not_equal "
        "not_equal_ one_hot pad relu reshape round round_ select sign sign_ sort tile topk transpose "
        "transpose_ tril tril_ triu triu_ type_as"),
    ULP: ("__matmul__ addbmm addbmm_ addmm addmm_ baddbmm baddbmm_ bilinear bmm chain_matmul hspmm linear "
          "matmul mm mv smm sspaddmm"),
    THOUSANDTH: "conv1d conv2d",
}
_STANDARD_BY_API = {api: standard for standard, names in _APIS.items() for api in names.split()}

# absolute-threshold standard: every listed API shares these per-dtype thresholds
_ABS_THRESHOLDS = {
    "float32": {"rtol": 1e-6, "small_value": 1e-6, "small_value_atol": 1e-9},
    "float16": {"rtol": 1e-3, "small_value": 1e-3, "small_value_atol": 1e-5},
    "bfloat16": {"rtol": 4e-3, "small_value": 1e-3, "small_value_atol": 1e-5},
}

def bare_api_name(name):
    """'Functional.linear.0.forward.output.0' or 'Tensor.add_.3' -> 'linear' / 'add_'."""
    call = parse_call_name(name)
    return call[1] if call else name


def standard_of(name):
    """The standard judging an API given by bare name ('add') or full row name."""
    return _STANDARD_BY_API.get(bare_api_name(name) if "." in name else name, BENCHMARK)


def dtype_short_name(dtype):
    """'torch.bfloat16' / 'BFloat16' / 'bfloat16' -> 'bfloat16' (lower case, no framework prefix)."""
    return str(dtype).rsplit(".", 1)[-1].lower()


def absolute_thresholds(dtype):
    """{'rtol', 'small_value', 'small_value_atol'} for a float dtype, or None when not a checked dtype."""
    return _ABS_THRESHOLDS.get(dtype_short_name(dtype))
