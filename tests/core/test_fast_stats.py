"""The C statistics kernel (msprobe/_native/_stats.c) on numpy buffers: exact Max/Min, sums far
more accurate than float32 reductions, NaN/inf semantics, every length around the vector and block
sizes, and the portable loops against the AVX2 ones."""
import math
import struct
import subprocess
import sys

import numpy as np
import pytest

from msprobe._native import VERSION
from msprobe._native import _stats as native  # the kernels themselves: built whatever MSPROBE_NATIVE_STATS says

minmax_sumsq = native.minmax_sumsq


def _run(array):
    array = np.ascontiguousarray(array)
    return minmax_sumsq(array.ctypes.data, array.size, array.itemsize)


def test_the_extension_is_built():
    # setup.py builds it (an optional extension); a missing compiler would silently cost dump speed
    assert native.VERSION == VERSION, "msprobe._native._stats is of another build: reinstall msprobe"


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
    for args in [(0, 4, 4), (array.ctypes.data, 0, 4), (array.ctypes.data, 4, 3), (array.ctypes.data, 4)]:
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


def test_portable_kernels_agree_with_the_simd_ones(portable_and_simd_rows):
    """MSPROBE_NATIVE_SIMD=0 runs the portable C loops (what non-x86 machines such as Ascend's aarch64
    hosts use); they must give the same Max/Min and sums equal to within rounding."""
    script = (
        "import json, sys, numpy as np\n"
        "from msprobe._native import _stats as f\n"
        "rows = []\n"
        "for count in (1, 3, 17, 1025, 70001):\n"
        "    for dtype in (np.float32, np.float64, np.float16):\n"
        "        a = (np.random.default_rng(count).standard_normal(count) * 3 - 1).astype(dtype)\n"
        "        rows.append(f.float_stats(a.ctypes.data, count, a.itemsize, None))\n"
        "    b = (a.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)\n"
        "    rows.append(f.float_stats(b.ctypes.data, count, f.BFLOAT16, None))\n"
        "b = np.ones(40, np.float32); b[33] = np.nan\n"
        "rows.append(f.minmax_sumsq(b.ctypes.data, 40, 4))\n"
        "print(json.dumps({'simd': f.simd(), 'rows': [[repr(v) for v in r] for r in rows]}))\n")
    for portable, simd in portable_and_simd_rows(script):
        portable, simd = [float(v) for v in portable], [float(v) for v in simd]
        if math.isnan(simd[0]):
            assert all(math.isnan(v) for v in portable)
            continue
        assert portable[:2] == simd[:2]
        assert portable[2:] == pytest.approx(simd[2:], rel=1e-6, abs=1e-6)


@pytest.mark.parametrize("kind", ["float16", "bfloat16"])
@pytest.mark.parametrize("count", [1, 15, 16, 1025, 70_001])
def test_16_bit_floats_are_widened_exactly(kind, count):
    rng = np.random.default_rng(count)
    wide = (rng.standard_normal(count) * 9 - 2).astype(np.float32)
    if kind == "float16":
        bits = wide.astype(np.float16).view(np.uint16)
        code = native.FLOAT16
    else:  # bfloat16 = the upper 16 bits of a float32
        bits = (wide.view(np.uint32) >> 16).astype(np.uint16)
        code = native.BFLOAT16
    exact = (bits.view(np.float16).astype(np.float64) if kind == "float16"
             else (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64))
    high, low, mean, norm = native.float_stats(bits.ctypes.data, count, code, None)
    assert (high, low) == (float(exact.max()), float(exact.min()))
    assert mean == pytest.approx(math.fsum(exact) / count, rel=1e-6, abs=1e-6)
    assert norm == pytest.approx(math.sqrt(math.fsum(exact * exact)), rel=1e-6)


def test_every_float16_bit_pattern_converts_exactly():
    patterns = np.arange(1 << 16, dtype=np.uint16)
    expected = patterns.view(np.float16).astype(np.float64)
    got = np.array([native.minmax_sumsq(patterns[k:].ctypes.data, 1, native.FLOAT16)[0] for k in range(1 << 16)])
    assert np.array_equal(got, expected, equal_nan=True)


# ---- bucket_stats: grad_probe's one pass ------------------------------------------------------------------
def _buckets(array, bounds, with_direction=True):
    array = np.ascontiguousarray(array)
    direction = np.full(array.size, 7, dtype=np.uint8) if with_direction else None
    result = native.bucket_stats(array.ctypes.data, array.size, array.itemsize, bounds,
                                 None if direction is None else direction.ctypes.data)
    return result, direction


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("count", [1, 7, 8, 9, 1000, 70_001])
def test_bucket_stats_recomputed(dtype, count):
    rng = np.random.default_rng(count)
    array = (rng.standard_normal(count) * 0.02).astype(dtype)
    array[:: 13] = 0.0
    array[1:: 17] = -0.0
    bounds = [float(dtype(b)) for b in (-0.01, 0.0, 0.01)]
    (high, low, sumsq, zeros, at_or_below), direction = _buckets(array, bounds)
    assert (high, low) == (float(array.max()), float(array.min()))
    assert sumsq == pytest.approx(float(np.sum(array.astype(np.float64) ** 2)), rel=1e-12)
    assert zeros == int(np.count_nonzero(array == 0))
    assert list(at_or_below) == [int(np.count_nonzero(array <= dtype(b))) for b in bounds]
    assert np.array_equal(direction, (array > 0).astype(np.uint8))


def test_bucket_stats_nan_inf_and_no_direction():
    array = np.array([1.0, np.nan, -np.inf, 0.0, 2.0, 0.5, -3.0, 4.0, 0.25], dtype=np.float32)
    (high, low, sumsq, zeros, at_or_below), direction = _buckets(array, [0.0, 1.0])
    assert math.isnan(high) and math.isnan(low) and math.isnan(sumsq)
    assert zeros == 1
    assert list(at_or_below) == [int(np.count_nonzero(array <= 0)), int(np.count_nonzero(array <= 1))]  # NaN in none
    assert np.array_equal(direction, (array > 0).astype(np.uint8))
    (high, _, _, zeros, counts), none = _buckets(np.array([0.0, 5.0], np.float32), [], with_direction=False)
    assert (high, zeros, counts, none) == (5.0, 1, (), None)


def test_bucket_stats_refuses_bad_arguments():
    array = np.ones(4, np.float32)
    with pytest.raises(ValueError):
        native.bucket_stats(array.ctypes.data, 4, 4, [0.0] * 65, None)
    with pytest.raises(ValueError):
        native.bucket_stats(array.ctypes.data, 0, 4, [0.0], None)
    with pytest.raises(TypeError):
        native.bucket_stats(array.ctypes.data, 4, 4, ["x"], None)


def test_bucket_stats_portable_loops_agree_with_simd(portable_and_simd_rows):
    script = (
        "import json, numpy as np\n"
        "from msprobe._native import _stats as f\n"
        "rows = []\n"
        "for count in (1, 9, 1025, 70001):\n"
        "    a = (np.random.default_rng(count).standard_normal(count) * 0.1).astype(np.float32)\n"
        "    a[::7] = 0\n"
        "    d = np.empty(count, np.uint8)\n"
        "    r = f.bucket_stats(a.ctypes.data, count, 4, [float(np.float32(-0.05)), 0.0, 0.125], d.ctypes.data)\n"
        "    rows.append([r[0], r[1], r[2], r[3], list(r[4]), int(d.sum())])\n"
        "print(json.dumps({'simd': f.simd(), 'rows': rows}))\n")
    for portable, simd in portable_and_simd_rows(script):
        assert portable[:2] == simd[:2] and portable[3:] == simd[3:]
        assert portable[2] == pytest.approx(simd[2], rel=1e-12)


def _long_buffers():
    """Float32 / float16 / bfloat16 buffers long enough for the thread pool, ending mid-block and mid-round, with
    values that tell the order of the additions and of the max / min lanes apart (signed zeros, wide scales)."""
    rng = np.random.default_rng(21)
    for count in (65536, 131072 + 7, 131072 + 255, 300_001, (1 << 20) + 13):
        wide = (rng.standard_normal(count) * 10.0 ** rng.integers(-6, 6, count)).astype(np.float32)
        zeros = np.where(rng.random(count) < 0.5, np.float32(0.0), np.float32(-0.0)).astype(np.float32)
        zeros[rng.integers(count, size=5)] = -3.0
        for array in (wide, zeros, -zeros):
            yield count, 4, array
            yield count, native.FLOAT16, array.astype(np.float16)
            yield count, native.BFLOAT16, (array.view(np.uint32) >> 16).astype(np.uint16)


def test_long_buffers_give_the_same_bits_on_any_thread_count():
    from msprobe._native import _stats as _fast_stats

    before = _fast_stats.threads(1, 65536)
    try:
        rows = {}
        for threads in (1, 2, 3, 8):
            _fast_stats.threads(threads)
            pooled = _fast_stats.threads()[2]
            rows[threads] = [(native.float_stats(a.ctypes.data, count, kind, None),
                              native.minmax_sumsq(a.ctypes.data, count, kind)) for count, kind, a in _long_buffers()]
            ran = _fast_stats.threads()[2] - pooled
            # the pool serves the AVX2 loops (x86); the portable loops stay on one thread
            assert ran == (0 if threads == 1 or not _fast_stats.simd() else 2 * len(rows[threads]))
        as_bits = {threads: [tuple(struct.pack("<d", v) for v in row[0] + row[1]) for row in found]
                   for threads, found in rows.items()}
        assert as_bits[2] == as_bits[1] and as_bits[3] == as_bits[1] and as_bits[8] == as_bits[1]
        # and the one-thread loop is right: the maxima and minima are exact
        for (_, kind, array), (stats, _) in zip(_long_buffers(), rows[1]):
            if kind == 4:
                assert (stats[0], stats[1]) == (float(array.max()), float(array.min()))
    finally:
        _fast_stats.threads(before[0], before[1])


def _reference_fingerprint(array):
    """stats.fingerprint_pair (the numpy definition) of the buffer's bytes, the tail zero-padded."""
    from msprobe.core.dump.stats import fingerprint_pair, format_fingerprint

    raw = np.frombuffer(np.ascontiguousarray(array).tobytes(), dtype=np.uint8)
    raw = np.concatenate([raw, np.zeros(-raw.size % 8, dtype=np.uint8)])
    return format_fingerprint(*fingerprint_pair(raw.view("<u8")))


def _digest_buffers():
    """float32 / float16 / bfloat16 / float64 buffers of lengths around the one-pass part (16 blocks of 256) and the
    round of 16, long enough for the pool, with a NaN, an infinity, signed zeros."""
    rng = np.random.default_rng(11)
    for count in (1, 17, 4095, 4096, 4097, 4111, 8192 + 9, 65_536 + 3, 131_072, 300_007):
        base = (rng.standard_normal(count) * 5).astype(np.float32)
        special = base.copy()
        special[count // 2] = np.nan if count > 1 else special[0]
        special[count // 3] = np.inf
        zeros = np.zeros(count, np.float32)
        zeros[::3] = -0.0
        for array in (base, special, zeros):
            yield 4, array
            yield native.FLOAT16, array.astype(np.float16)
            yield native.BFLOAT16, (array.view(np.uint32) >> 16).astype(np.uint16)
            yield 8, array.astype(np.float64)


def test_one_pass_digest_equals_the_statistics_kernel_and_the_fingerprint_definition():
    # stats_fingerprint reads a long buffer once (each 16 KB part fingerprinted after its statistics); its values
    # must be float_stats' bit for bit and the numpy definition's fingerprint, on one thread and on the pool
    from msprobe._native import _stats as _fast_stats

    before = _fast_stats.threads(1, 65536)
    try:
        for threads in (1, 2):
            _fast_stats.threads(threads)
            for kind, array in _digest_buffers():
                stats, text = native.stats_fingerprint(array.ctypes.data, array.size, kind)
                expected = native.float_stats(array.ctypes.data, array.size, kind, None)
                assert struct.pack("<4d", *stats) == struct.pack("<4d", *expected), (kind, array.size, threads)
                assert text == _reference_fingerprint(array), (kind, array.size, threads)
    finally:
        _fast_stats.threads(before[0], before[1])
    with pytest.raises(ValueError):
        native.stats_fingerprint(0, 4, 4)
    with pytest.raises(ValueError):
        native.stats_fingerprint(np.zeros(4, np.float32).ctypes.data, 4, 3)


def test_one_pass_digest_of_the_portable_loops_equals_the_simd_one(portable_and_simd_rows):
    # without AVX2 the two kernels run one after the other: the same fingerprint, statistics within rounding
    script = (
        "import json, numpy as np\n"
        "from msprobe._native import _stats as f\n"
        "rows = []\n"
        "for count in (5, 4097, 70_001):\n"
        "    a = (np.random.default_rng(count).standard_normal(count) * 3).astype(np.float32)\n"
        "    stats, text = f.stats_fingerprint(a.ctypes.data, count, 4)\n"
        "    rows.append([text] + [repr(v) for v in stats])\n"
        "print(json.dumps({'simd': f.simd(), 'rows': rows}))\n")
    for portable, simd in portable_and_simd_rows(script):
        assert portable[0] == simd[0]
        assert [float(v) for v in portable[1:3]] == [float(v) for v in simd[1:3]]
        assert [float(v) for v in portable[3:]] == pytest.approx([float(v) for v in simd[3:]], rel=1e-6)


def test_a_forked_child_reduces_long_buffers_without_the_parent_workers():
    # the child has none of the parent's pool threads: it starts its own instead of waiting for them
    script = (
        "import os, numpy as np\n"
        "from msprobe._native import _stats as f\n"
        "f.threads(2, 65536)\n"
        "a = np.arange(1 << 20, dtype=np.float32)\n"
        "parent = f.float_stats(a.ctypes.data, a.size, 4, None)\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    os._exit(0 if f.float_stats(a.ctypes.data, a.size, 4, None) == parent else 3)\n"
        "_, status = os.waitpid(pid, 0)\n"
        "print(parent[0], os.waitstatus_to_exitcode(status), f.threads()[2])\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    high, child_status, pooled = result.stdout.split()
    assert (float(high), int(child_status)) == (float((1 << 20) - 1), 0)
    assert int(pooled) == (1 if native.minmax_sumsq is not None and _simd() else 0)


def _simd():
    from msprobe._native import _stats as _fast_stats

    return _fast_stats.simd()


def test_python_threads_reducing_long_buffers_at_once_get_the_one_thread_bits():
    # the GIL is released around the kernel: two callers may share the pool, and each must be woken when done
    import threading

    from msprobe._native import _stats as _fast_stats

    arrays = [np.random.default_rng(k).standard_normal(300_001 + k).astype(np.float32) for k in range(4)]
    before = _fast_stats.threads(1, 65536)
    try:
        expected = [native.float_stats(a.ctypes.data, a.size, 4, None) for a in arrays]
        _fast_stats.threads(2)
        found = {k: [] for k in range(3)}

        def reduce_many(k):
            for r in range(60):
                a = arrays[(k + r) % 4]
                found[k].append(native.float_stats(a.ctypes.data, a.size, 4, None) == expected[(k + r) % 4])

        threads = [threading.Thread(target=reduce_many, args=(k,)) for k in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert not any(thread.is_alive() for thread in threads)
        assert all(all(results) and len(results) == 60 for results in found.values())
    finally:
        _fast_stats.threads(before[0], before[1])


def test_strided_kernels_equal_the_dense_kernels_on_the_c_order_copy():
    # float_stats_strided / fingerprint_strided gather a view in C order: numpy views (slices, steps, transposes,
    # broadcasts through stride 0) give the bits of the contiguous kernels on np.ascontiguousarray of the view
    rng = np.random.default_rng(7)
    base = rng.standard_normal((9, 8, 13))
    broadcast = np.broadcast_to(base[:1], (5, 8, 13))
    for dtype, kind in ((np.float32, 4), (np.float64, 8), (np.float16, native.FLOAT16)):
        typed = base.astype(dtype)
        for view in (typed[:, 2:5], typed[::3], typed[..., ::2], typed.transpose(2, 0, 1), typed[4],
                     np.broadcast_to(typed[:1], (5, 8, 13)), typed[3, 2, 1:2]):
            dense = np.ascontiguousarray(view)
            strides = tuple(s // view.itemsize for s in view.strides)
            expected = native.float_stats(dense.ctypes.data, dense.size, kind, None)
            assert native.float_stats_strided(view.ctypes.data, kind, view.shape, strides) == expected
            assert (native.fingerprint_strided(view.ctypes.data, view.itemsize, view.shape, strides)
                    == native.fingerprint(dense.ctypes.data, dense.nbytes))
    assert broadcast.strides[0] == 0
    empty = base[:, :0]
    assert native.fingerprint_strided(empty.ctypes.data, 8, empty.shape, tuple(s // 8 for s in empty.strides)) == (0, 0)


def test_transposed_views_copied_in_tiles_equal_their_c_order_copy():
    # a view whose second-last dimension is the denser one is gathered in tiles (256 bytes by 8 elements); the
    # shapes cross tile edges both ways, the itemsizes take each tile height, steps and broadcasts ride along
    rng = np.random.default_rng(3)
    for dtype in (np.uint8, np.float16, np.float32, np.float64, np.complex128):
        for rows, cols in ((8, 8), (9, 130), (300, 17), (64, 8), (513, 31)):
            base = (rng.standard_normal((3, cols, rows)) * 50).astype(dtype)
            for view in (base.transpose(0, 2, 1), base[1].T, base.transpose(0, 2, 1)[:, ::2, 1:],
                         base[:, ::3].transpose(2, 0, 1), np.broadcast_to(base[:1], (2, cols, rows)).transpose(0, 2, 1)):
                dense = np.ascontiguousarray(view)
                strides = tuple(s // view.itemsize for s in view.strides)
                assert (native.fingerprint_strided(view.ctypes.data, view.itemsize, view.shape, strides)
                        == native.fingerprint(dense.ctypes.data, dense.nbytes)), (dtype, rows, cols, view.strides)
                kind = {np.float16: native.FLOAT16, np.float32: 4, np.float64: 8}.get(dtype)
                if kind is not None:
                    assert (native.float_stats_strided(view.ctypes.data, kind, view.shape, strides)
                            == native.float_stats(dense.ctypes.data, dense.size, kind, None))
    # fingerprints are summed a 64 KB part at a time: rows longer than a part, parts ending mid-word
    long_rows = rng.standard_normal((3, 50001)).astype(np.float32)
    for view in (long_rows[:, ::2], long_rows[1, ::3], long_rows.astype(np.float16)[:, 1::2],
                 long_rows.reshape(3, 3, 16667).astype(np.float16).transpose(0, 2, 1)):
        dense = np.ascontiguousarray(view)
        strides = tuple(s // view.itemsize for s in view.strides)
        assert (native.fingerprint_strided(view.ctypes.data, view.itemsize, view.shape, strides)
                == native.fingerprint(dense.ctypes.data, dense.nbytes))


def test_strided_kernels_refuse_bad_arguments():
    array = np.zeros(4, np.float32)
    with pytest.raises(ValueError):
        native.float_stats_strided(array.ctypes.data, 3, (4,), (1,))  # not a float kind
    with pytest.raises(ValueError):
        native.fingerprint_strided(array.ctypes.data, 4, (4, 1), (1,))  # sizes and strides of different lengths
    with pytest.raises(ValueError):
        native.fingerprint_strided(array.ctypes.data, 4, (4,), (-1,))  # negative strides
    with pytest.raises(ValueError):
        native.float_stats_strided(array.ctypes.data, 4, (0,), (1,))  # nothing to reduce
