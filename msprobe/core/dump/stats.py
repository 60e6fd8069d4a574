"""The dump statistics as one table: each name with how to compute it and how to combine partial results.

    STATS = {"Max": Stat(compute, combine), "Min": ..., "Mean": ..., "Norm": ...}

The order of the table is the order of the keys in a tensor descriptor and of the tuples that adapters'
`tensor_stats` return (STAT_KEYS). `compute(array)` is the reference definition on a float numpy array
(float64 accumulation); adapters keep their fused kernels for the common case (the C kernel of native.py,
torch's reductions) and use the table where they fall back or split a tensor into parts. `combine(parts)`
merges the statistics of parts of one tensor, `parts` being (value, element count) pairs: Max of maxima,
Mean weighted by counts, Norm as the root of the summed squares. A NaN in any part makes the whole NaN,
as it would for the whole tensor.

    combine_stats([(stats_of_part, count), ...]) -> the statistics of the concatenation

Beside the table, summary_mode "xor" adds a bitwise fingerprint of each tensor (descriptor key "xor"): the raw
bytes read as little-endian 64-bit words w_i (the last zero-padded), then two sums modulo 2^64, the XOR of all
words and the weighted sum of (2i + 1) * w_i, written as 32 hex digits (XOR first). Equal bits give equal
fingerprints; one flipped bit anywhere changes both halves; a moved element changes the weighted sum.

    fingerprint(array) -> "0123...": the C kernel of native.py on a host buffer, numpy otherwise
    fingerprint_pair(words) -> (xor, wsum) of a uint64 numpy array (the reference definition)
    format_fingerprint(xor, wsum) -> the hex string (device paths compute the pair with framework integer ops)
"""
import math
from typing import Callable, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from msprobe.core.dump import native

__all__ = ["Stat", "STATS", "STAT_KEYS", "compute_stats", "combine_stats", "has_non_finite", "FINGERPRINT_KEY",
           "fingerprint", "fingerprint_pair", "format_fingerprint"]

Part = Tuple[float, int]


class Stat(NamedTuple):
    compute: Callable[[np.ndarray], float]
    combine: Callable[[Sequence[Part]], float]


def _nan_in(parts):
    return any(value != value for value, _ in parts)


def _combine_max(parts):
    return math.nan if _nan_in(parts) else max(value for value, _ in parts)


def _combine_min(parts):
    return math.nan if _nan_in(parts) else min(value for value, _ in parts)


def _combine_mean(parts):
    count = sum(n for _, n in parts)
    return math.fsum(value * n for value, n in parts) / count if count else math.nan


def _combine_norm(parts):
    return math.sqrt(math.fsum(value * value for value, _ in parts))


def _norm(array):
    # BLAS nrm2 on the flat array: no temporary and no overflow of x*x
    return float(np.linalg.norm(array.reshape(-1)))


STATS = {
    "Max": Stat(lambda array: float(array.max()), _combine_max),
    "Min": Stat(lambda array: float(array.min()), _combine_min),
    "Mean": Stat(lambda array: float(array.mean(dtype=np.float64)), _combine_mean),
    "Norm": Stat(_norm, _combine_norm),
}
STAT_KEYS = tuple(STATS)


def compute_stats(array) -> Optional[tuple]:
    """The table's statistics of a float numpy array, in STAT_KEYS order (None when it is empty)."""
    if array.size == 0:
        return None
    with np.errstate(invalid="ignore", over="ignore"):  # inf/nan are results here, not errors
        return tuple(stat.compute(array) for stat in STATS.values())


def combine_stats(parts) -> tuple:
    """Statistics of a whole from [(statistics tuple of a part, element count), ...]."""
    return tuple(stat.combine([(stats[i], count) for stats, count in parts])
                 for i, stat in enumerate(STATS.values()))


def has_non_finite(desc) -> bool:
    """True when a descriptor (or any descriptor nested in lists/dicts) has an inf or nan Max or Min: an
    inf/nan element always shows there, while Norm and Mean of large finite values may overflow alone."""
    if isinstance(desc, (list, tuple)):
        return any(has_non_finite(item) for item in desc)
    if isinstance(desc, dict):
        if "Max" in desc:
            return any(type(desc[key]) is float and not math.isfinite(desc[key]) for key in ("Max", "Min"))
        return any(has_non_finite(item) for item in desc.values())
    return False


# -- summary_mode "xor" ------------------------------------------------------------------------------
FINGERPRINT_KEY = "xor"  # the descriptor key, beside (never instead of) the statistics and "md5"
_MASK = (1 << 64) - 1
_CHUNK = 1 << 20  # words per numpy round: bounds the temporary weights


def format_fingerprint(xor, wsum) -> str:
    return f"{xor & _MASK:016x}{wsum & _MASK:016x}"


def fingerprint_pair(words) -> tuple:
    """(XOR, sum of (2i+1) * w_i) modulo 2^64 of a 1-D uint64 array: the reference definition in numpy."""
    xor, total = np.uint64(0), 0
    for start in range(0, words.size, _CHUNK):
        part = words[start:start + _CHUNK]
        weights = np.arange(2 * start + 1, 2 * (start + part.size), 2, dtype=np.uint64)
        xor ^= np.bitwise_xor.reduce(part) if part.size else np.uint64(0)
        total += int((part * weights).sum(dtype=np.uint64))  # uint64 wraps: arithmetic modulo 2^64
    return int(xor), total & _MASK


def _words(raw: np.ndarray) -> np.ndarray:
    """uint8 bytes -> little-endian uint64 words, the tail zero-padded."""
    pad = -raw.size % 8
    if pad:
        raw = np.concatenate([raw, np.zeros(pad, dtype=np.uint8)])
    return raw.view("<u8")


def fingerprint(array) -> str:
    """The "xor" fingerprint of a numpy array's bytes in C order (any dtype; views are made contiguous)."""
    array = np.ascontiguousarray(array)
    if array.nbytes == 0:
        return format_fingerprint(0, 0)
    if native.fingerprint is not None:
        return format_fingerprint(*native.fingerprint(array.ctypes.data, array.nbytes))
    return format_fingerprint(*fingerprint_pair(_words(array.reshape(-1).view(np.uint8))))
