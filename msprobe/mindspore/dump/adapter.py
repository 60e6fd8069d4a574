"""MindSpore implementation of the core dump adapter: descriptors, statistics, CRC-32, .npy files.

The statistics are those of the core table (msprobe/core/dump/stats.py), computed on a host copy of the
tensor (several MindSpore reductions, mint.norm among them, have no CPU kernel, and a host copy is needed
anyway on CPU) by core/dump/array_stats.py.
bfloat16 has no numpy type, so such tensors are widened to float32 first.
"""
import zlib

import numpy as np

from msprobe.core.dump.adapter import DumpAdapter
from msprobe.core.dump.array_stats import array_statistics
from msprobe.core.dump.stats import fingerprint

__all__ = ["MindSporeAdapter", "get_adapter", "to_numpy", "dtype_name"]


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


_ADAPTER = None


def get_adapter():
    """The process-wide adapter (created on first use, so importing this module stays cheap)."""
    global _ADAPTER
    if _ADAPTER is None:
        _ADAPTER = MindSporeAdapter()
    return _ADAPTER
