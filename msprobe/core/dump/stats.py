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
"""
import math
from typing import Callable, NamedTuple, Optional, Sequence, Tuple

import numpy as np

__all__ = ["Stat", "STATS", "STAT_KEYS", "compute_stats", "combine_stats", "has_non_finite"]

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
