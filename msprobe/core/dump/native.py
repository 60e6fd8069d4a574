"""The optional C kernel of the dump statistics (msprobe/core/dump/_fast_stats.c).

`minmax_sumsq(address, count, itemsize) -> (max, min, sum of squares)` reads a dense float32
(itemsize 4) or float64 (itemsize 8) buffer once, releasing the GIL; the framework adapters use it
for host tensors and add the framework's own sum for Mean. It is None when the extension was not
built (no C compiler at install time) or when MSPROBE_NATIVE_STATS=0: adapters then use their
framework kernels, which give the same Max/Min and a Norm equal to within float32 rounding.
"""
import os

__all__ = ["minmax_sumsq"]

minmax_sumsq = None
if os.environ.get("MSPROBE_NATIVE_STATS", "1") != "0":
    try:
        from msprobe.core.dump._fast_stats import minmax_sumsq
    except ImportError:  # built without a compiler: the framework path serves
        minmax_sumsq = None
