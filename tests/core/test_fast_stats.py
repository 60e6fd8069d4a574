"""The C statistics kernel (msprobe/core/dump/_fast_stats.c) on numpy buffers: exact Max/Min, a sum of
sum of squares far more accurate than a float32 dot product, NaN/inf semantics, every length around the vector and block sizes."""
import math

import numpy as np
import pytest

from msprobe.core.dump import native

minmax_sumsq = native.minmax_sumsq


def _run(array):
    array = np.ascontiguousarray(array)
    return minmax_sumsq(array.ctypes.data, array.size, array.itemsize)


def test_the_extension_is_built():
    # setup.py builds it (an optional extension); a missing compiler would silently cost dump speed
    assert minmax_sumsq is not None, "msprobe.core.dump._fast_stats was not built: reinstall with a C compiler"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("count", [1, 3, 7, 8, 15, 16, 17, 31, 1023, 1024, 1025, 2047, 4096 + 5, 100_003])
def test_matches_numpy_on_every_length(dtype, count):
    rng = np.random.default_rng(count)
    array = (rng.standard_normal(count) * 7 + 3).astype(dtype)
    array[rng.integers(count)] = -40.5  # the minimum somewhere inside, also in the scalar tail
    high, low, squares = _run(array)
    assert (high, low) == (float(array.max()), float(array.min()))
    exact = math.fsum(float(v) * float(v) for v in array.astype(np.float64))
    assert squares == pytest.approx(exact, rel=1e-13 if dtype == np.float64 else 1e-7)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("position", [0, 5, 16, 700, 1024, 2999])
def test_nan_anywhere_gives_nan(dtype, position):
    array = np.linspace(-1, 1, 3000, dtype=dtype)
    array[position] = np.nan
    assert all(math.isnan(v) for v in _run(array))


def test_infinities_are_kept():
    array = np.linspace(-1, 1, 3000, dtype=np.float32)
    array[10], array[2000] = np.inf, -np.inf
    assert _run(array) == (math.inf, -math.inf, math.inf)


def test_float32_squares_overflow_like_a_float32_norm():
    # torch.linalg.vector_norm of float32 is inf once the squares leave float32's range: same here
    array = np.full(64, 3e38, dtype=np.float32)
    high, low, squares = _run(array)
    assert (high, low, squares) == (float(np.float32(3e38)), float(np.float32(3e38)), math.inf)
    assert _run(np.full(64, 1e18, dtype=np.float32))[2] == pytest.approx(64 * float(np.float32(1e18)) ** 2,
                                                                          rel=1e-7)


def test_bad_arguments_raise():
    array = np.ones(4, dtype=np.float32)
    for args in [(0, 4, 4), (array.ctypes.data, 0, 4), (array.ctypes.data, 4, 2), (array.ctypes.data, 4)]:
        with pytest.raises((ValueError, TypeError)):
            minmax_sumsq(*args)


@pytest.mark.parametrize("count", [1, 9, 1025, 70_001])
def test_float_stats_rounds_mean_and_norm_to_float32(count):
    rng = np.random.default_rng(count)
    array = (rng.standard_normal(count) * 5 + 2).astype(np.float32)
    pointer = array.ctypes.data
    high, low, mean, norm = native.float_stats(pointer, count, 4, None)
    exact = [float(v) for v in array]
    assert (high, low) == (float(array.max()), float(array.min()))
    assert mean == pytest.approx(math.fsum(exact) / count, rel=1e-6)
    assert norm == pytest.approx(math.sqrt(math.fsum(v * v for v in exact)), rel=1e-7)
    assert float(np.float32(mean)) == mean and float(np.float32(norm)) == norm  # float32 values
    # with a framework's own sum, Mean is that sum divided in float32
    total = float(array.sum(dtype=np.float32))
    assert native.float_stats(pointer, count, 4, total)[2] == float(np.float32(total) / np.float32(count))
    doubles = array.astype(np.float64)
    assert native.float_stats(doubles.ctypes.data, count, 8, None)[2] == pytest.approx(float(doubles.mean()),
                                                                                     rel=1e-12, abs=1e-15)
