"""Tensor-mode metrics and statistics diffs on hand-computed values."""
import math

import numpy as np
import pytest

from msprobe.core.compare.metrics import statistics_diffs, tensor_metrics
from msprobe.core.compare.reasons import Reason


def _five(metrics):
    """1.2.1's five metrics, by name (the table may hold more)."""
    return (metrics.cosine, metrics.max_abs, metrics.max_rel, metrics.one_thousandth, metrics.five_thousandths)


def _not_compared(metrics):
    return all(math.isnan(v) for v in metrics.values)


def test_identical_tensors_are_perfect():
    a = np.array([1.0, -2.0, 3.0], dtype=np.float32)
    result = tensor_metrics(a, a.copy())
    assert _five(result) == (1.0, 0.0, 0.0, 1.0, 1.0) and result.reason == Reason.OK
    assert result.error_norm == 0.0 and result.bench_norm == pytest.approx(math.sqrt(14))


def test_hand_computed_metrics():
    npu = np.array([1.0, 2.0, 3.0, 4.0], dtype=np.float32)
    bench = np.array([1.0, 2.003, 3.0, 5.0], dtype=np.float32)
    result = tensor_metrics(npu, bench)
    (cosine, max_abs, max_rel, one, five), reason = _five(result), result.reason
    expected_cos = np.dot(npu.astype(float), bench) / np.linalg.norm(npu.astype(float)) / np.linalg.norm(bench.astype(float))
    assert cosine == pytest.approx(expected_cos, abs=1e-9)
    assert max_abs == pytest.approx(1.0, abs=1e-6)
    assert max_rel == pytest.approx(0.2, abs=1e-6)
    assert one == 0.5          # rel errors 0, 0.0015, 0, 0.2
    assert five == 0.75
    assert reason == Reason.OK
    assert tensor_metrics(npu, bench).error_norm == pytest.approx(math.hypot(0.003, 1.0), rel=1e-6)


def test_zero_bench_shifts_both_sides_by_float64_epsilon():
    """The documented formula (and 1.2.1): where bench is exactly 0 both values get + 2**-52 first. A
    conv bias gradient of 3 * 2**-33 against an exact 0 is 3 * 2**19 = 1572864, and it fails both ratios."""
    npu = np.array([3 * 2.0 ** -33], dtype=np.float32)
    bench = np.array([0.0], dtype=np.float32)
    result = tensor_metrics(npu, bench)
    assert result.max_rel == 1572864.0
    assert (result.one_thousandth, result.five_thousandths) == (0.0, 0.0)
    # both exactly zero: relative error 0, counted as agreeing
    assert _five(tensor_metrics(np.zeros(2, np.float32), np.zeros(2, np.float32)))[2:] == (0.0, 1.0, 1.0)
    # a denormal bench value is divided by as it is (no epsilon floor)
    tiny = tensor_metrics(np.array([2e-39], np.float32), np.array([1e-39], np.float32))
    assert tiny.max_rel == pytest.approx(1.0, rel=1e-3)


@pytest.mark.parametrize("npu, bench, expected", [
    (np.zeros(4, np.float32), np.zeros(4, np.float32), 1.0),
    (np.zeros(4, np.float32), np.ones(4, np.float32), "nan"),
    (np.array([1.0, 0.0]), np.array([0.0, 1.0]), 0.0),
    (np.array([1.0, 2.0]), np.array([-1.0, -2.0]), -1.0),
])
def test_cosine_edge_cases(npu, bench, expected):
    cosine = tensor_metrics(npu, bench).cosine
    if expected == "nan":
        assert math.isnan(cosine)
    else:
        assert cosine == pytest.approx(expected)


def test_nan_at_same_positions_compares_the_rest():
    npu = np.array([np.nan, 1.0, np.inf], dtype=np.float32)
    bench = np.array([np.nan, 1.0, np.inf], dtype=np.float32)
    assert _five(tensor_metrics(npu, bench)) == (1.0, 0.0, 0.0, 1.0, 1.0)


def test_nan_at_different_positions_is_reported():
    npu = np.array([np.nan, 1.0], dtype=np.float32)
    bench = np.array([1.0, np.nan], dtype=np.float32)
    result = tensor_metrics(npu, bench)
    assert _not_compared(result) and result.reason == Reason.NAN_POSITION


def test_inf_sign_mismatch_is_reported():
    assert tensor_metrics(np.array([np.inf, 1.0]), np.array([-np.inf, 1.0])).reason == Reason.NAN_POSITION


def test_shape_mismatch():
    result = tensor_metrics(np.zeros((2, 3)), np.zeros((3, 2)))
    assert _not_compared(result) and result.reason == Reason.SHAPE_MISMATCH


def test_empty_tensor():
    result = tensor_metrics(np.zeros((0, 4)), np.zeros((0, 4)))
    assert _not_compared(result) and result.reason == Reason.EMPTY


def test_zero_dim_tensor():
    result = tensor_metrics(np.array(2.0), np.array(1.5))
    (cosine, max_abs, max_rel, one, five), reason = _five(result), result.reason
    assert math.isnan(cosine) and math.isnan(one) and math.isnan(five)
    assert max_abs == 0.5 and max_rel == pytest.approx(1 / 3, abs=1e-9)
    assert reason == Reason.ZERO_DIM


def test_integer_and_bool_tensors():
    ints = tensor_metrics(np.array([1, 2, 3], np.int64), np.array([1, 2, 4], np.int64))
    assert ints.max_abs == 1.0 and ints.max_rel == 0.25
    bools = tensor_metrics(np.array([True, False]), np.array([True, True]))
    assert bools.max_abs == 1.0


def test_statistics_diffs_sign_and_relative():
    npu = np.array([[2.0, -1.0, 0.0, 5.0], [np.nan, 1.0, 1.0, 1.0]])
    bench = np.array([[1.0, -1.0, 0.0, 4.0], [1.0, 0.0, 1.0, 2.0]])
    diff, relative = statistics_diffs(npu, bench)
    assert diff[0].tolist() == [1.0, 0.0, 0.0, 1.0]
    assert relative[0].tolist() == [1.0, 0.0, 0.0, 0.25]
    assert math.isnan(relative[1, 0]) and math.isnan(relative[1, 1])  # absent value; bench 0 with a diff
    assert relative[1, 3] == 0.5



def test_euclidean_distance_is_the_norm_of_the_difference():
    npu = np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32)
    bench = np.array([[1.0, 2.5], [3.0, 2.0]], dtype=np.float32)
    assert tensor_metrics(npu, bench).euclidean == pytest.approx(math.hypot(0.5, 2.0), abs=1e-12)
    assert tensor_metrics(np.array(2.0), np.array(-1.0)).euclidean == 3.0  # a 0-d tensor has one
    same_nan = np.array([np.nan, 1.0, 2.0])
    assert tensor_metrics(same_nan, np.array([np.nan, 1.0, 1.0])).euclidean == 1.0  # NaN left out
    assert math.isnan(tensor_metrics(np.zeros(2), np.zeros(3)).euclidean)  # not compared


def test_euclidean_distance_is_a_column_after_the_reference_columns(out_dir):
    import os

    import torch

    from compare_samples import sample_dump
    from msprobe.core.compare import CompareOptions, compare_dumps

    npu, bench = sample_dump("pytorch_tensor_mix_run_a"), sample_dump("pytorch_tensor_mix_run_b")
    result = compare_dumps(npu, bench, out_dir, CompareOptions(timestamp="1", progress=False))[0].result
    header, columns = result.header, result.columns
    assert header[header.index("Data_name") + 1:] == ["EucDist", "Suspicion"]
    row = next(i for i, value in enumerate(columns["Cosine"]) if isinstance(value, float)
               and columns["NPU Tensor Shape"][i] != "[]")
    files = [os.path.join(os.path.dirname(path), "dump_tensor_data", columns["Data_name"][row]) for path in (npu, bench)]
    a, b = (torch.load(f, weights_only=True).double().numpy() for f in files)
    assert columns["EucDist"][row] == pytest.approx(float(np.linalg.norm(a - b)), rel=1e-5, abs=1e-12)


def test_same_fill_pairs_dtype_extremes_of_the_same_sign():
    from msprobe.core.compare.tolerance import same_fill

    bf16_min, fp32_min, fp16_min = -3.3895313892515355e38, -3.4028234663852886e38, -65504.0
    npu = np.array([bf16_min, fp16_min, bf16_min, -3.0e38, 65504.0])
    bench = np.array([fp32_min, fp32_min, -bf16_min, fp32_min, 65504.0])
    assert same_fill(npu, bench).tolist() == [True, True, False, False, True]


def test_masked_scores_compare_without_their_fills():
    bench = np.array([[0.5, -3.4028234663852886e38], [0.25, 0.75]], dtype=np.float32)
    npu = bench.copy()
    npu[0, 1] = -3.3895313892515355e38  # the same mask, filled with finfo(bfloat16).min
    npu[1, 1] = 0.75 + 0.01
    result = tensor_metrics(npu, bench)
    assert result.reason == Reason.OK
    assert result.max_abs == pytest.approx(0.01, rel=1e-4)
    kept = np.array([0.5, 0.25, 0.75])
    assert result.error_norm == pytest.approx(0.01, rel=1e-4)
    assert result.bench_norm == pytest.approx(float(np.linalg.norm(kept)), rel=1e-6)


def test_a_fill_against_an_ordinary_value_still_differs():
    bench = np.array([0.5, -1.0e30], dtype=np.float32)
    npu = np.array([0.5, -3.3895313892515355e38], dtype=np.float32)
    assert tensor_metrics(npu, bench).max_abs > 1e37
