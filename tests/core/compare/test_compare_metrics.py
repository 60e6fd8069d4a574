"""Tensor-mode metrics and statistics diffs on hand-computed values."""
import math

import numpy as np
import pytest

from msprobe.core.compare.metrics import (MSG_EMPTY, MSG_NAN_POSITION, MSG_SHAPE, MSG_ZERO_DIM, NA, NONE,
                                          SHAPE_UNMATCHED, UNSUPPORTED, statistics_diffs, tensor_metrics)


def test_identical_tensors_are_perfect():
    a = np.array([1.0, -2.0, 3.0], dtype=np.float32)
    assert tensor_metrics(a, a.copy()) == (1.0, 0.0, 0.0, 1.0, 1.0, "")


def test_hand_computed_metrics():
    npu = np.array([1.0, 2.0, 3.0, 4.0], dtype=np.float32)
    bench = np.array([1.0, 2.003, 3.0, 5.0], dtype=np.float32)
    cosine, max_abs, max_rel, one, five, message = tensor_metrics(npu, bench)
    expected_cos = np.dot(npu.astype(float), bench) / np.linalg.norm(npu.astype(float)) / np.linalg.norm(bench.astype(float))
    assert cosine == pytest.approx(expected_cos, abs=1e-9)
    assert max_abs == pytest.approx(1.0, abs=1e-6)
    assert max_rel == pytest.approx(0.2, abs=1e-6)
    assert one == 0.5          # rel errors 0, 0.0015, 0, 0.2
    assert five == 0.75
    assert message == ""


def test_zero_bench_uses_epsilon_in_relative_error():
    npu = np.array([1e-3, 1.0], dtype=np.float32)
    bench = np.array([0.0, 1.0], dtype=np.float32)
    max_rel = tensor_metrics(npu, bench)[2]
    assert max_rel == pytest.approx(1e-3 / np.finfo(np.float32).eps, rel=1e-5)


@pytest.mark.parametrize("npu, bench, expected", [
    (np.zeros(4, np.float32), np.zeros(4, np.float32), 1.0),
    (np.zeros(4, np.float32), np.ones(4, np.float32), "nan"),
    (np.array([1.0, 0.0]), np.array([0.0, 1.0]), 0.0),
    (np.array([1.0, 2.0]), np.array([-1.0, -2.0]), -1.0),
])
def test_cosine_edge_cases(npu, bench, expected):
    cosine = tensor_metrics(npu, bench)[0]
    if expected == "nan":
        assert math.isnan(cosine)
    else:
        assert cosine == pytest.approx(expected)


def test_nan_at_same_positions_compares_the_rest():
    npu = np.array([np.nan, 1.0, np.inf], dtype=np.float32)
    bench = np.array([np.nan, 1.0, np.inf], dtype=np.float32)
    assert tensor_metrics(npu, bench)[:5] == (1.0, 0.0, 0.0, 1.0, 1.0)


def test_nan_at_different_positions_is_reported():
    npu = np.array([np.nan, 1.0], dtype=np.float32)
    bench = np.array([1.0, np.nan], dtype=np.float32)
    assert tensor_metrics(npu, bench) == (NA, NA, NA, NA, NA, MSG_NAN_POSITION)


def test_inf_sign_mismatch_is_reported():
    assert tensor_metrics(np.array([np.inf, 1.0]), np.array([-np.inf, 1.0]))[5] == MSG_NAN_POSITION


def test_shape_mismatch():
    result = tensor_metrics(np.zeros((2, 3)), np.zeros((3, 2)))
    assert result == (SHAPE_UNMATCHED,) * 5 + (MSG_SHAPE,)


def test_empty_tensor():
    assert tensor_metrics(np.zeros((0, 4)), np.zeros((0, 4))) == (NONE,) * 5 + (MSG_EMPTY,)


def test_zero_dim_tensor():
    cosine, max_abs, max_rel, one, five, message = tensor_metrics(np.array(2.0), np.array(1.5))
    assert (cosine, one, five) == (UNSUPPORTED,) * 3
    assert max_abs == 0.5 and max_rel == pytest.approx(1 / 3, abs=1e-9)
    assert message == MSG_ZERO_DIM


def test_integer_and_bool_tensors():
    ints = tensor_metrics(np.array([1, 2, 3], np.int64), np.array([1, 2, 4], np.int64))
    assert ints[1] == 1.0 and ints[2] == 0.25
    bools = tensor_metrics(np.array([True, False]), np.array([True, True]))
    assert bools[1] == 1.0


def test_statistics_diffs_sign_and_relative():
    npu = np.array([[2.0, -1.0, 0.0, 5.0], [np.nan, 1.0, 1.0, 1.0]])
    bench = np.array([[1.0, -1.0, 0.0, 4.0], [1.0, 0.0, 1.0, 2.0]])
    diff, relative = statistics_diffs(npu, bench)
    assert diff[0].tolist() == [1.0, 0.0, 0.0, 1.0]
    assert relative[0].tolist() == [1.0, 0.0, 0.0, 0.25]
    assert math.isnan(relative[1, 0]) and math.isnan(relative[1, 1])  # absent value; bench 0 with a diff
    assert relative[1, 3] == 0.5
