"""[Max, Min, Mean, Norm] of a host numpy array, as the dump writes them (no framework involved).

Used wherever a tensor is already on the host as numpy: the MindSpore adapter (which reads every tensor
back to the host, see msprobe/mindspore/dump/adapter.py), its monitor, and the native kernel dump files
(core/dump/kernel_files.py). float32/float64 arrays take one pass of the C kernel of core/dump/native.py;
every other dtype, and every dtype without the kernel, uses the definitions of the core table (stats.py).
"""
from typing import List, Optional, Union

import numpy as np

from msprobe.core.dump.native import float_stats
from msprobe.core.dump.stats import compute_stats

__all__ = ["array_statistics"]

_KERNEL_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))

Number = Union[bool, int, float, None]


def array_statistics(array: np.ndarray) -> Optional[List[Number]]:
    """[Max, Min, Mean, Norm] of a numpy array as Python numbers; None for an empty array.

    Bool arrays give Max/Min as bools and no Mean/Norm; integer arrays give int Max/Min.
    Float16 is widened so that the norm does not overflow.
    """
    if array.size == 0:
        return None
    flat = array.reshape(-1)
    if flat.dtype == np.bool_:
        return [bool(flat.any()), bool(flat.all()), None, None]
    if flat.dtype.kind in "iu":
        wide = flat.astype(np.float64)
        return [int(flat.max()), int(flat.min()), float(wide.mean()), float(np.sqrt(np.dot(wide, wide)))]
    if flat.dtype.kind == "c":
        flat = np.abs(flat)
    if flat.dtype.itemsize < 4:
        flat = flat.astype(np.float32)
    if float_stats is not None and flat.dtype in _KERNEL_DTYPES and flat.flags.c_contiguous:
        # one pass of the C kernel (see msprobe/core/dump/native.py); float32 results in float32
        return list(float_stats(flat.ctypes.data, flat.size, flat.itemsize, None))
    computed = compute_stats(flat)  # the core table's definitions
    if computed is None:
        return None
    stats: List[Number] = list(computed)
    if flat.dtype == np.float32:  # float32 Mean and Norm, as the kernel (and MindSpore's own reductions) give them
        with np.errstate(over="ignore"):
            stats[2:] = [value if value is None else float(np.float32(value)) for value in stats[2:]]
    return stats
