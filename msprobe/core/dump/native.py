"""The optional C kernels of the dump statistics (msprobe._native._stats, msprobe/_native/_stats.c).

`minmax_sumsq(address, count, itemsize) -> (max, min, sum of squares)` reads a dense float32 (itemsize
4), float64 (8), float16 (FLOAT16) or bfloat16 (BFLOAT16) buffer once (without the GIL for long buffers).
`float_stats(address, count, itemsize, total=None) -> (max, min, mean, norm)` gives all four statistics from that
one pass (the elements are summed in float32 blocks, then in double: Mean is as accurate as torch.mean or better, and does not
change with the thread count as torch's float32 sum does), or divides a framework's own sum `total` for
Mean; float32 buffers get float32-rounded Mean and Norm.
`bucket_stats(address, count, itemsize, bounds, direction_address) -> (max, min, sumsq, zeros, at_or_below)`
is grad_probe's pass: besides max/min/sum of squares, the zeros, the elements <= each bound (bounds compared
as given, in double: round them to the buffer's dtype first to match a framework comparison) and, given the
address of `count` bytes, the direction (element > 0) written as 0/1 bytes.
`fingerprint(address, nbytes) -> (xor, weighted sum)` is summary_mode "xor" (see stats.fingerprint).
`stats_fingerprint(address, count, itemsize) -> (float_stats(...), fingerprint text)` gives both in one call, and for
float32 / float16 / bfloat16 buffers of 4 K elements or more in one pass over the memory (each 16 KB part
fingerprinted right after its statistics, while it is in the cache: a tensor of a few MB is read from memory once,
not twice); the same values as the two kernels.
`float_stats_strided(address, itemsize, sizes, strides)` and `fingerprint_strided(address, itemsize, sizes, strides)`
are float_stats and fingerprint of a strided view (a slice, a broadcast, a transpose; strides in elements) taken
in C order: the results of its dense copy, without a framework copy.
Long float32 / float16 / bfloat16 buffers (128 K elements or more) are reduced by the calling thread and a small
pool of threads (2 by default, at most the CPUs the process may use; MSPROBE_STATS_THREADS=1 turns it off,
MSPROBE_STATS_THREAD_MIN sets the shortest pooled buffer): the hook runs while the framework's threads wait, and
the block sums are added in the one-thread order, so every result is the same bits on any thread count.
All are None when the extension was not built
(no C compiler at install time) or when MSPROBE_NATIVE_STATS=0: adapters then use their framework
kernels, which give the same Max/Min/Mean and a Norm equal to within float32 rounding.
"""
from msprobe._native import load

__all__ = ["minmax_sumsq", "float_stats", "bucket_stats", "fingerprint", "stats_fingerprint", "float_stats_strided",
           "fingerprint_strided", "FLOAT16", "BFLOAT16"]

# the `itemsize` that names a 16-bit float buffer (widened to float32 exactly); the built module's own
# values replace these below
FLOAT16, BFLOAT16 = 2, 258
minmax_sumsq = float_stats = bucket_stats = fingerprint = float_stats_strided = fingerprint_strided = None
stats_fingerprint = None
_kernels = load("_stats")
if _kernels is not None:
    FLOAT16, BFLOAT16 = _kernels.FLOAT16, _kernels.BFLOAT16
    minmax_sumsq, float_stats, bucket_stats = _kernels.minmax_sumsq, _kernels.float_stats, _kernels.bucket_stats
    fingerprint, stats_fingerprint = _kernels.fingerprint, _kernels.stats_fingerprint
    float_stats_strided, fingerprint_strided = _kernels.float_stats_strided, _kernels.fingerprint_strided
