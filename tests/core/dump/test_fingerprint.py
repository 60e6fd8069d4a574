"""summary_mode "xor": the fingerprint of stats.py in C (portable and AVX2) and numpy against plain Python ints."""
import struct

import numpy as np
import pytest

from msprobe._native import _stats as native  # the kernel itself: built whatever MSPROBE_NATIVE_STATS says
from msprobe.core.dump.stats import fingerprint, fingerprint_pair, format_fingerprint


def python_fingerprint(data: bytes) -> str:
    """The definition with Python integers: 64-bit little-endian words, XOR and sum of (2i+1)*w mod 2^64."""
    data = data + b"\0" * (-len(data) % 8)
    words = struct.unpack(f"<{len(data) // 8}Q", data)
    xor, total = 0, 0
    for i, word in enumerate(words):
        xor ^= word
        total = (total + (2 * i + 1) * word) % (1 << 64)
    return f"{xor:016x}{total:016x}"


def test_the_fingerprint_kernel_is_built():
    assert native.fingerprint is not None


@pytest.mark.parametrize("nbytes", [1, 7, 8, 9, 63, 64, 65, 127, 1000, 4099])
def test_c_kernel_and_numpy_match_python_integers(nbytes):
    raw = np.random.default_rng(nbytes).integers(0, 256, nbytes, dtype=np.uint8)
    expected = python_fingerprint(raw.tobytes())
    assert fingerprint(raw) == expected
    padded = np.concatenate([raw, np.zeros(-nbytes % 8, np.uint8)])
    assert format_fingerprint(*fingerprint_pair(padded.view("<u8"))) == expected


def test_empty_array_has_the_zero_fingerprint():
    assert fingerprint(np.zeros(0, np.float32)) == "0" * 32


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_every_single_bit_flip_changes_the_fingerprint(dtype):
    array = np.random.default_rng(1).standard_normal(37).astype(dtype)
    base = fingerprint(array)
    raw = array.view(np.uint8).copy()
    for byte in range(raw.size):
        for bit in range(8):
            raw[byte] ^= 1 << bit
            value = fingerprint(raw)
            raw[byte] ^= 1 << bit
            assert value != base, (byte, bit)
            assert value[:16] != base[:16] and value[16:] != base[16:]  # both halves see it
    assert fingerprint(raw) == base


def test_signed_zeros_nan_payloads_and_moved_elements_differ():
    assert fingerprint(np.array([0.0], np.float32)) != fingerprint(np.array([-0.0], np.float32))
    quiet = np.array([0x7FC00000], np.uint32).view(np.float32)
    payload = np.array([0x7FC00001], np.uint32).view(np.float32)
    assert fingerprint(quiet) != fingerprint(payload)
    words = np.arange(1, 9, dtype=np.float64)
    assert fingerprint(words) != fingerprint(words[::-1].copy())  # XOR alone cannot see a permutation


def test_non_contiguous_views_fingerprint_their_values_in_c_order():
    matrix = np.arange(48, dtype=np.float32).reshape(6, 8)
    view = matrix.T[::2]
    assert fingerprint(view) == python_fingerprint(np.ascontiguousarray(view).tobytes())


def test_portable_fingerprint_agrees_with_simd(portable_and_simd_rows):
    script = (
        "import json, numpy as np\n"
        "from msprobe._native import _stats as f\n"
        "rows = []\n"
        "for n in (1, 8, 31, 64, 65, 520, 70001, 1 << 20):\n"
        "    a = np.random.default_rng(n).integers(0, 256, n, dtype=np.uint8)\n"
        "    rows.append([str(v) for v in f.fingerprint(a.ctypes.data, n)])\n"
        "print(json.dumps({'simd': f.simd(), 'rows': rows}))\n")
    pairs = portable_and_simd_rows(script)
    assert len(pairs) == 8
    for portable, simd in pairs:
        assert portable == simd


def test_fingerprint_refuses_bad_arguments():
    with pytest.raises(ValueError):
        native.fingerprint(0, 8)
    with pytest.raises(TypeError):
        native.fingerprint(1)
