"""The statistics table (core/dump/stats.py): definitions, combination of parts, and agreement with the adapters'
fused kernels; the non-finite test overflow_check uses."""
import math

import numpy as np
import pytest
import torch

from msprobe.core.dump.stats import STAT_KEYS, STATS, combine_stats, compute_stats, has_non_finite
from msprobe.pytorch.dump.adapter import TorchAdapter

CASES = [
    ("plain", [1.0, -2.0, 3.0, 4.0], (4.0, -2.0, 1.5, math.sqrt(30.0))),
    ("one element", [7.0], (7.0, 7.0, 7.0, 7.0)),
    ("zeros", [0.0, 0.0], (0.0, 0.0, 0.0, 0.0)),
    ("inf", [1.0, math.inf], (math.inf, 1.0, math.inf, math.inf)),
    ("minus inf", [-math.inf, 1.0], (1.0, -math.inf, -math.inf, math.inf)),
]


@pytest.mark.parametrize("label, values, expected", CASES, ids=[c[0] for c in CASES])
def test_table_definitions(label, values, expected):
    assert STAT_KEYS == ("Max", "Min", "Mean", "Norm")
    assert compute_stats(np.array(values, dtype=np.float64)) == pytest.approx(expected)


def test_nan_and_empty():
    stats = compute_stats(np.array([1.0, math.nan]))
    assert all(math.isnan(v) for v in stats)
    assert compute_stats(np.array([], dtype=np.float32)) is None


@pytest.mark.parametrize("cuts", [[1], [3, 7], [1, 2, 3, 999]])
def test_combining_parts_gives_the_statistics_of_the_whole(cuts):
    values = np.random.default_rng(len(cuts)).standard_normal(1000) * 5
    parts = [(compute_stats(part), part.size) for part in np.split(values, cuts) if part.size]
    assert combine_stats(parts) == pytest.approx(compute_stats(values), rel=1e-12)


def test_a_nan_in_one_part_makes_max_and_min_nan_whatever_the_order():
    parts = [((1.0, 0.0, 0.5, 1.0), 2), ((math.nan,) * 4, 1)]
    for ordered in (parts, parts[::-1]):
        combined = combine_stats(ordered)
        assert math.isnan(combined[0]) and math.isnan(combined[1])
    assert STATS["Norm"].combine([(3.0, 1), (4.0, 1)]) == 5.0


def test_the_torch_kernel_agrees_with_the_table():
    tensor = torch.randn(300, 70, dtype=torch.float64)
    assert TorchAdapter().tensor_stats(tensor) == pytest.approx(compute_stats(tensor.numpy()), rel=1e-9)


def test_non_finite_looks_at_max_and_min_only():
    finite_big = {"dtype": "torch.float16", "shape": [2], "Max": 6e4, "Min": 6e4, "Mean": 6e4, "Norm": math.inf}
    assert not has_non_finite({"output": [finite_big]})
    assert has_non_finite({"input_args": [None, {"x": [{**finite_big, "Min": -math.inf}]}]})
    assert has_non_finite([{**finite_big, "Max": math.nan}])
    assert not has_non_finite([{"type": "torch.Tensor", "Max": True, "Min": False}])  # bool: any / all
