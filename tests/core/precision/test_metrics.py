"""Table-driven tests of the precision metrics and judgements on hand-computed values."""
import math

import numpy as np
import pytest

from msprobe.core.precision import metrics as m
from msprobe.core.precision.new_standard import judge_row, ratio
from msprobe.core.precision.output_check import aggregate_status, check_output, judge_cosine_abs, judge_run_ut
from msprobe.core.precision.standards import bare_api_name, standard_of

NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize("tested, bench, expected", [
    ([1, 0], [1, 0], 1.0),
    ([1, 0], [0, 1], 0.0),
    ([1, 1], [-1, -1], -1.0),
    ([0, 0], [0, 0], 1.0),             # identical zeros are similar
    ([0, 0], [1, 0], 0.0),             # one side all zero
    ([1, NAN, 2], [1, NAN, 2], 1.0),   # NaN positions left out
    ([], [], NAN),
    ([3, 4], [4, 3], 24 / 25),
])
def test_cosine_similarity(tested, bench, expected):
    got = m.cosine_similarity(tested, bench)
    assert (math.isnan(got) and math.isnan(expected)) or got == pytest.approx(expected)


@pytest.mark.parametrize("tested, bench, abs_err, rel_max", [
    ([1.0, 2.0], [1.0, 2.5], 0.5, 0.2),
    ([0.0], [0.0], 0.0, 0.0),
    ([1, 2, 3], [1, 2, 3], 0.0, 0.0),          # integers
    ([1.0, INF], [1.5, INF], 0.5, 1 / 3),
    ([], [], 0.0, 0.0),
])
def test_max_abs_and_relative_error(tested, bench, abs_err, rel_max):
    assert m.max_abs_error(tested, bench) == pytest.approx(abs_err)
    assert m.max_relative_error(tested, bench) == pytest.approx(rel_max)


def test_ratio_within_counts_relative_errors_at_each_tolerance():
    bench = np.ones(1000)
    tested = bench.copy()
    tested[:5] += 0.005      # 0.5% off: fails 双千, passes 双百
    tested[5:6] += 0.05      # 5% off: fails 双百
    assert m.ratio_within(tested, bench, 0.01) == pytest.approx(0.999)
    assert m.ratio_within(tested, bench, 0.001) == pytest.approx(0.994)
    assert m.ratio_within([], [], 0.01) == 1.0


@pytest.mark.parametrize("tested, bench, expected", [
    ([NAN, 1], [NAN, 1], 0.0),
    ([INF, 1], [INF, 1], 0.0),
    ([INF, 1], [-INF, 1], 0.5),
    ([NAN, 1, 2, 3], [1, 1, 2, 3], 0.25),
    ([1, 2], [1, INF], 0.5),
    ([], [], 0.0),
])
def test_inf_nan_error_rate(tested, bench, expected):
    assert m.inf_nan_error_rate(tested, bench) == pytest.approx(expected)


@pytest.mark.parametrize("tested, bench, expected", [
    ([1, 2, 3, 4], [1, 2, 3, 5], 0.25),
    ([True, False], [True, True], 0.5),
    ([NAN, 1.0], [NAN, 1.0], 0.0),
    ([], [], 0.0),
])
def test_binary_error_rate(tested, bench, expected):
    assert m.binary_error_rate(tested, bench) == pytest.approx(expected)


def test_small_value_rmse_error_balance_and_normal_relative_errors():
    bench = np.array([1e-4, 2e-4, 1.0, 2.0])
    tested = np.array([1e-4 + 1e-3, 2e-4, 1.1, 2.0])
    # |bench| < 2**-10 for the first two; only the first is off by more than 2**-16
    assert m.small_value_error_rate(tested, bench, 2 ** -10, 2 ** -16) == pytest.approx(0.5)
    assert m.rmse(tested, bench) == pytest.approx(math.sqrt((1e-6 + 0.01) / 4))
    assert m.normal_relative_error_stats(tested, bench, 2 ** -10) == pytest.approx((0.1, 0.05))
    assert m.error_balance([1.1, 0.9], [1.0, 1.0], 1e-6) == pytest.approx(0.0, abs=1e-12)
    assert m.error_balance([1.1, 1.1], [1.0, 1.0], 1e-6) == pytest.approx(0.1)


@pytest.mark.parametrize("tested, bench, dtype, expected_max", [
    ([1.0 + 2 ** -7], [1.0], "bfloat16", 1.0),       # one bf16 ulp at 1.0
    ([1.0 + 2 ** -10], [1.0], "float16", 1.0),
    ([2.0 + 2 ** -22], [2.0], "float32", 1.0),
    ([0.0], [0.0], "float32", 0.0),
    ([2 ** -149], [0.0], "float32", 1.0),            # subnormal ulp at zero
])
def test_ulp_errors(tested, bench, dtype, expected_max):
    assert m.ulp_summary(tested, bench, dtype)[0] == pytest.approx(expected_max)


def test_absolute_threshold_rates():
    bench = np.array([1.0, 1.0, 1e-7, 1e-7, NAN])
    tested = np.array([1.0 + 2e-6, 1.0, 1e-7 + 2e-9, 1e-7, 1.0])
    inf_nan, rel_rate, abs_rate = m.absolute_threshold_rates(tested, bench, rtol=1e-6, small_value=1e-6,
                                                             small_value_atol=1e-9)
    assert (inf_nan, rel_rate, abs_rate) == pytest.approx((0.2, 0.5, 0.5))


@pytest.mark.parametrize("args, expected", [
    ((0.98, 0.5, 1, 1, 1, "float32"), "error"),          # cosine too low
    ((1.0, 0.0005, 0.5, 0.5, 0.5, "bfloat16"), "pass"),  # tiny abs error passes at once
    ((1.0, 0.01, 0.98, 1, 1, "bfloat16"), "error"),      # 双百 fails
    ((1.0, 0.01, 1.0, 0.99, 1, "float16"), "warning"),   # 双千 fails
    ((1.0, 0.01, 1.0, 1.0, 1, "bfloat16"), "pass"),
    ((1.0, 0.01, 1, 0.99, 1, "float32"), "error"),       # 双千 fails for float32
    ((1.0, 0.01, 1, 1.0, 0.999, "float32"), "warning"),  # 双万 fails
    ((NAN, 0.0, 1, 1, 1, "float32"), "error"),
])
def test_judge_run_ut(args, expected):
    assert judge_run_ut(*args)[0] == expected


def test_judge_cosine_abs_for_mindspore():
    assert judge_cosine_abs(0.995, 5e-5)[0] == "pass"
    assert judge_cosine_abs(0.995, 2e-4)[0] == "error"
    assert judge_cosine_abs(0.98, 0.0)[0] == "error"


@pytest.mark.parametrize("statuses, expected", [
    (["pass", "pass"], "pass"), (["pass", "warning"], "warning"), (["warning", "error", "pass"], "error"),
    (["SKIP"], "SKIP"), ([], ""),
])
def test_aggregate_status(statuses, expected):
    assert aggregate_status(statuses) == expected


def test_check_output_judges_against_rounded_bench_and_flags_nan():
    bench = np.linspace(0.5, 1.5, 100)
    rounded = np.round(bench * 128) / 128          # what a perfect low-precision op returns
    ok = check_output("Functional.gelu.0.forward.output.0", rounded, bench, "torch.bfloat16", rounded)
    assert ok["status"] == "pass" and ok["max_abs_err"] == 0.0 and ok["rmse"] > 0
    bad = check_output("Functional.gelu.0.forward.output.0", rounded * 1.03, bench, "torch.bfloat16", rounded)
    assert bad["status"] == "error"
    nan_row = check_output("Torch.exp.0.forward.output.0", [1.0, NAN], [1.0, 2.0], "torch.float32")
    assert nan_row["status"] == "error" and nan_row["inf_nan_err_rate"] == 0.5
    ints = check_output("Torch.argmax.0.forward.output.0", np.array([1, 2]), np.array([1, 3]), "torch.int64")
    assert ints["status"] == "error" and ints["binary_err_rate"] == 0.5
    assert "ulp_max" in check_output("Functional.linear.0.forward.output.0", [1.0], [1.0], "torch.float32")
    shape = check_output("Torch.exp.0.forward.output.0", np.ones(2), np.ones(3), "torch.float32")
    assert shape["status"] == "error"


def test_standard_of_api_names():
    assert standard_of("Tensor.add_.3.forward.output.0") == "absolute_threshold"
    assert standard_of("Functional.linear.0.backward.output.1") == "ulp"
    assert standard_of("Functional.relu.2") == "binary"
    assert standard_of("Functional.conv2d.0.forward.output.0") == "thousandth"
    assert standard_of("Functional.gelu.0.forward.output.0") == "benchmark"
    assert bare_api_name("Tensor.__add__.12.forward.output.0") == "__add__"


@pytest.mark.parametrize("npu, gpu, expected", [(1.0, 0.5, 2.0), (0.0, 0.0, 1.0), (1.0, 0.0, INF),
                                               (INF, INF, 1.0), (None, None, 1.0)])
def test_ratio(npu, gpu, expected):
    assert ratio(npu, gpu) == expected


def test_judge_row_per_standard():
    base = {"small_value_err_ratio": 0.1, "rmse": 1.0, "rel_err_max": 1.0, "rel_err_mean": 1.0,
            "error_balance": 1.0}
    assert judge_row("benchmark", base, base, "bfloat16")["比对结果"] == "pass"
    worse = dict(base, rmse=3.0)
    cells = judge_row("benchmark", worse, base, "bfloat16")
    assert cells["比对结果"] == "error" and cells["均方根误差判定结果"] == "error" and "均方根误差" in cells["Message"]
    eb_only = dict(base, error_balance=10.0)   # error balance is reported, not judged
    assert judge_row("benchmark", eb_only, base, "float32")["比对结果"] == "pass"
    assert judge_row("absolute_threshold", {"inf_nan_err_rate": 0, "rel_err_rate": 0.01, "abs_err_rate": 0},
                     {}, "float32")["比对结果"] == "error"
    assert judge_row("binary", {"binary_err_rate": 0.0}, {}, "float16")["比对结果"] == "pass"
    assert judge_row("ulp", {"ulp_mean": 100, "ulp_ratio": 0.01}, {"ulp_ratio": 0.0}, "float32")["比对结果"] == "pass"
    assert judge_row("ulp", {"ulp_mean": 1, "ulp_ratio": 0.01}, {"ulp_ratio": 0.0}, "bfloat16")["比对结果"] == "error"
    assert judge_row("ulp", {"ulp_mean": 1, "ulp_ratio": 0.01}, {"ulp_ratio": 0.02}, "bfloat16")["比对结果"] == "pass"
    assert judge_row("thousandth", {"thousandth": 0.998}, {}, "float32")["比对结果"] == "error"
    # an NPU no worse than the GPU passes every standard
    absolute = {"inf_nan_err_rate": 0, "rel_err_rate": 0.01, "abs_err_rate": 0.2}
    assert judge_row("absolute_threshold", absolute, absolute, "bfloat16")["比对结果"] == "pass"
    assert judge_row("absolute_threshold", absolute, dict(absolute, rel_err_rate=0.005), "bfloat16")["比对结果"] == "error"
    assert judge_row("ulp", {"ulp_mean": 1, "ulp_ratio": 0.01}, {"ulp_ratio": 0.01}, "bfloat16")["比对结果"] == "pass"
    assert judge_row("thousandth", {"thousandth": 0.998}, {"thousandth": 0.998}, "float32")["比对结果"] == "pass"
    assert judge_row("binary", {"binary_err_rate": 0.1}, {"binary_err_rate": 0.1}, "float16")["比对结果"] == "pass"
    assert judge_row("benchmark", base, base, "float64")["比对结果"] == "SKIP"
