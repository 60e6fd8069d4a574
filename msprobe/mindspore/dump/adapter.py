"""MindSpore implementation of the core dump adapter: descriptors, statistics, CRC-32, .npy files.

The statistics are those of the core table (msprobe/core/dump/stats.py), computed on a host copy of the
tensor (several MindSpore reductions, mint.norm among them, have no CPU kernel, and a host copy is needed
anyway on CPU): float32/float64 arrays in one pass of the C kernel of msprobe/core/dump/native.py, other
dtypes (and every dtype without the kernel) with the table's numpy definitions.
bfloat16 has no numpy type, so such tensors are widened to float32 first.
"""
import os
import zlib

import numpy as np

from msprobe.core.dump.adapter import DumpAdapter
from msprobe.core.dump.native import float_stats
from msprobe.core.dump.stats import compute_stats, fingerprint

__all__ = ["MindSporeAdapter", "get_adapter", "current_rank", "to_numpy", "array_statistics", "dtype_name"]


def _mindspore():
    import mindspore
    return mindspore


def dtype_name(tensor):
    """'Float32', 'BFloat16', 'Int64', 'Bool' ... as MindSpore prints them."""
    return str(tensor.dtype)


def to_numpy(tensor):
    """A numpy array with the tensor's values (bfloat16 widened to float32)."""
    ms = _mindspore()
    if tensor.dtype == ms.bfloat16:
        tensor = tensor.astype(ms.float32)
    return tensor.asnumpy()


_KERNEL_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def array_statistics(array):
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
    return list(compute_stats(flat))  # the core table's definitions


class MindSporeAdapter(DumpAdapter):
    """Describes mindspore.Tensor values for core/dump."""

    framework = "mindspore"
    tensor_suffix = ".npy"
    has_requires_grad = False

    def __init__(self):
        self._tensor_type = _mindspore().Tensor

    def is_tensor(self, value):
        return isinstance(value, self._tensor_type)

    def tensor_header(self, tensor):
        return {"type": "mindspore.Tensor", "dtype": dtype_name(tensor), "shape": list(tensor.shape)}

    def tensor_stats(self, tensor):
        # computed now, on the host: MindSpore's CPU reduction kernels are several times slower
        # than numpy (measured: a step went from 4.6 s to 24 s with four queued reductions per tensor)
        stats = array_statistics(to_numpy(tensor))
        return None if stats is None else tuple(stats)

    def crc32(self, tensor):
        """CRC-32 of the raw bytes; bfloat16 is read bit for bit as int16 (as torch does for its bf16)."""
        ms = _mindspore()
        raw = tensor.view(ms.int16).asnumpy() if tensor.dtype == ms.bfloat16 else tensor.asnumpy()
        return f"{zlib.crc32(np.ascontiguousarray(raw).tobytes()) & 0xffffffff:08x}"

    def fingerprint(self, tensor):
        """summary_mode "xor" on the raw bytes of a host copy (as the statistics; bfloat16 read bit for bit)."""
        ms = _mindspore()
        raw = tensor.view(ms.int16).asnumpy() if tensor.dtype == ms.bfloat16 else tensor.asnumpy()
        return fingerprint(raw)

    def random_state(self):
        """The global generator's state (seed and offset); ops seeded on their own are not covered."""
        return fingerprint(_mindspore().get_rng_state().asnumpy())

    def copy_for_save(self, tensor):
        return np.array(to_numpy(tensor), copy=True)

    def save_tensor(self, saved, path):
        np.save(path, saved)

    def describe_other(self, value):
        ms = _mindspore()
        if isinstance(value, ms.dtype.Type):
            return {"type": "mindspore.dtype", "value": str(value)}
        return None

    def current_rank(self):
        return current_rank()


def current_rank():
    """Rank from the distributed runtime when initialised, else from RANK_ID (set by msrun), else None."""
    try:
        from mindspore.communication import get_rank
        from mindspore.communication._comm_helper import _is_initialized
        if _is_initialized():
            return int(get_rank())
    except Exception:  # noqa: BLE001 - any failure means "not distributed"
        pass
    for key in ("RANK_ID", "RANK"):
        value = os.environ.get(key, "").strip()
        if value.isdigit():
            return int(value)
    return None


_ADAPTER = None


def get_adapter():
    """The process-wide adapter (created on first use, so importing this module stays cheap)."""
    global _ADAPTER
    if _ADAPTER is None:
        _ADAPTER = MindSporeAdapter()
    return _ADAPTER
