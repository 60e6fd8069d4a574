"""The single-benchmark judge of online_dispatch on hand-computed values."""
import numpy as np
import pytest

from msprobe.pytorch.online_dispatch.single_benchmark import FAIL, PASS, THRESHOLDS, judge_output

FP16_THD, FP16_EB = 2.0 ** -11, 2.0 ** -10


def test_thresholds_follow_the_device_dtype():
    assert THRESHOLDS["float16"] == (2.0 ** -11, 2.0 ** -10)
    assert THRESHOLDS["bfloat16"] == (2.0 ** -8, 2.0 ** -7)
    assert THRESHOLDS["float32"] == (2.0 ** -14, 2.0 ** -14)


def test_correctly_rounded_fp16_passes_although_fp32_thresholds_would_fail_it():
    bench = np.array([1.0 / 3, 2.0 / 3, 10.0 / 3, -7.0 / 3], dtype=np.float32)
    dut = bench.astype(np.float16)
    row = judge_output(dut, bench, "float16")
    rel = np.abs(dut.astype(np.float64) - bench) / np.maximum(np.abs(bench), 1.0)
    assert row["status"] == PASS
    assert row["max_rel_err"] == pytest.approx(rel[np.abs(bench) >= 1].max())
    assert row["max_rel_err"] > 2.0 ** -14  # 1.2.1 applied fp32 thresholds to fp16 and failed this
    assert row["error_thd"] == FP16_THD and row["eb_thd"] == FP16_EB


@pytest.mark.parametrize("bench, dut, status, key, value, index", [
    # |bench| < 1: absolute error; 0.5 + 2^-10 is off by 2^-10 > 2^-11
    ([0.5, 0.25], [0.5 + 2.0 ** -10, 0.25], FAIL, "max_abs_err", 2.0 ** -10, 0),
    # |bench| >= 1: relative error; 4 vs 4.00390625 is off by 2^-10 relatively
    ([1.0, 4.0], [1.0, 4.00390625], FAIL, "max_rel_err", 2.0 ** -10, 1),
    # error exactly at the threshold passes
    ([2.0, 0.5], [2.0 + 2.0 ** -10, 0.5], PASS, "max_rel_err", 2.0 ** -11, 0),
])
def test_small_values_absolute_large_values_relative(bench, dut, status, key, value, index):
    row = judge_output(np.array(dut), np.array(bench), "float16")
    assert row["status"] == status
    assert row[key] == pytest.approx(value)
    assert row[key.replace("err", "idx")] == index


def test_error_balance_is_the_mean_signed_error():
    bench = np.full(1000, 0.5)
    dut = bench + 2.0 ** -11 * 0.9  # every element high by 0.9 of the element threshold
    row = judge_output(dut, bench, "float16")
    assert row["max_abs_err"] <= FP16_THD
    assert row["error_balance"] == pytest.approx(2.0 ** -11 * 0.9)
    assert row["status"] == PASS  # 0.9 * 2^-11 < 2^-10
    dut_bf16 = bench + 2.0 ** -8 * 0.9
    assert judge_output(dut_bf16, bench, "bfloat16")["status"] == PASS
    row = judge_output(bench + 0.9 * 2.0 ** -14, bench, "float32")
    assert row["status"] == PASS and row["error_balance"] == pytest.approx(0.9 * 2.0 ** -14)
    balanced = bench + np.where(np.arange(1000) % 2 == 0, 1, -1) * 2.0 ** -11
    assert judge_output(balanced, bench, "float16")["error_balance"] == pytest.approx(0.0)


def test_error_balance_over_threshold_fails():
    bench = np.array([1.0, 2.0, 4.0, 8.0])
    dut = bench * (1 + 2.0 ** -9)  # every element high by 2^-9 relatively: eb 2^-9 > 2^-10, rel 2^-9 > 2^-11
    row = judge_output(dut, bench, "float16")
    assert row["status"] == FAIL and "error balance" in row["message"]


def test_special_values():
    assert judge_output(np.array([np.inf, 1.0]), np.array([np.inf, 1.0]), "float16")["status"] == PASS
    assert judge_output(np.array([np.nan, 1.0]), np.array([np.nan, 1.0]), "float16")["status"] == PASS
    row = judge_output(np.array([np.inf, 1.0]), np.array([70000.0, 1.0]), "float16")  # fp16 overflow
    assert row["status"] == FAIL and "NaN/Inf" in row["message"]
    assert judge_output(np.array([-np.inf]), np.array([np.inf]), "float16")["status"] == FAIL


def test_integers_bools_empty_and_shapes():
    assert judge_output(np.array([1, 2]), np.array([1, 2]), "int64")["status"] == PASS
    row = judge_output(np.array([1, 3]), np.array([1, 2]), "int64")
    assert row["status"] == FAIL and row["message"] == "1 of 2 values differ"
    assert judge_output(np.array([True]), np.array([False]), "bool")["status"] == FAIL
    assert judge_output(np.zeros(0), np.zeros(0), "float32")["status"] == PASS
    assert judge_output(np.zeros(3), np.zeros(4), "float32")["status"] == FAIL


def test_extra_columns_cosine_and_overall_max_abs():
    bench = np.array([3.0, 4.0])
    dut = np.array([3.0, 4.5])
    row = judge_output(dut, bench, "float32")
    assert row["max_abs_all"] == pytest.approx(0.5)
    assert row["cosine"] == pytest.approx((9 + 18) / (5 * np.hypot(3, 4.5)))


def test_indices_count_every_element_when_special_values_are_left_out():
    bench = np.array([np.nan, 0.5, np.inf, 3.0])
    dut = np.array([np.nan, 0.5 + 2.0 ** -9, np.inf, 3.0 * (1 + 2.0 ** -9)])
    row = judge_output(dut, bench, "float16")
    assert (row["max_abs_idx"], row["max_rel_idx"]) == (1, 3)
    assert row["max_abs_err"] == pytest.approx(2.0 ** -9) and row["max_rel_err"] == pytest.approx(2.0 ** -9)
