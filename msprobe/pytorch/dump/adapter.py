"""The torch implementation of the core dump adapter: descriptors, fused statistics, CRC-32, .pt files.

Statistics follow the reference: float16/bfloat16 and integer tensors are reduced in float32,
bool tensors give Max = any, Min = all (Mean/Norm null), a 0-d tensor gives its value for all four,
complex tensors are described by their absolute values, empty and meta tensors give nulls.
Each tensor costs a few reduction kernels and one small stacked result tensor; the results of a
whole step are copied to Python with one `tolist()` per (dtype, device) group.
"""
import zlib

import torch

from msprobe.core.dump.adapter import DumpAdapter

__all__ = ["TorchAdapter", "tensor_statistics"]

_LOW_PRECISION = (torch.float16, torch.bfloat16)
_DTYPE_NAMES = {}


def tensor_statistics(tensor):
    """A tuple of 0-d tensors (Max, Min, Mean, Norm) — (any, all) for bool — or None without
    statistics. Nothing is stacked or copied to the host here; `resolve_stats` does that in bulk."""
    data = tensor.detach()
    if data.is_meta or data.numel() == 0:
        return None
    if data.dtype == torch.bool:
        return (data.any(), data.all())
    if data.is_complex():
        data = data.abs()
    if data.dim() == 0:
        value = data.clone()  # later in-place ops must not change the recorded value
        return (value, value, value, value)
    if not data.is_floating_point():
        data = data.float()
    if data.dtype in _LOW_PRECISION:
        low, high = torch.aminmax(data)
        return (high.float(), low.float(), data.mean(dtype=torch.float32),
                torch.linalg.vector_norm(data, dtype=torch.float32))
    low, high = torch.aminmax(data)
    return (high, low, data.mean(), torch.linalg.vector_norm(data))


class TorchAdapter(DumpAdapter):
    """Describes torch values for msprobe.core.dump."""

    framework = "pytorch"
    tensor_suffix = ".pt"
    has_requires_grad = True

    def is_tensor(self, value):
        return isinstance(value, torch.Tensor)

    def tensor_header(self, tensor):
        dtype = tensor.dtype
        name = _DTYPE_NAMES.get(dtype)
        if name is None:
            name = _DTYPE_NAMES[dtype] = str(dtype)
        # a tuple (written as a JSON list) keeps the descriptor free of mutable containers, so the
        # garbage collector can stop tracking it: thousands of them live until the step ends
        return {"type": "torch.Tensor", "dtype": name, "shape": tuple(tensor.shape)}

    def requires_grad(self, tensor):
        return bool(tensor.requires_grad)

    def tensor_identity(self, tensor):
        # memory + layout + version: a gradient and its view-of-the-same-memory twin (what the
        # next op's hook receives) share statistics without recomputing them
        try:
            return (tensor.data_ptr(), tensor.dtype, tuple(tensor.shape), tensor.stride(), tensor._version,
                    tensor.device)
        except RuntimeError:  # inference tensors have no version counter; meta/sparse have no data_ptr
            return None

    def tensor_stats(self, tensor):
        return tensor_statistics(tensor)

    def resolve_stats(self, handles):
        groups = {}
        for position, handle in enumerate(handles):
            first = handle[0]
            groups.setdefault((first.dtype, first.device), []).append(position)
        results = [None] * len(handles)
        for positions in groups.values():
            flat = torch.stack([value for p in positions for value in handles[p]]).tolist()
            offset = 0
            for p in positions:
                size = len(handles[p])
                values = flat[offset:offset + size]
                offset += size
                results[p] = values if size == 4 else values + [None, None]
        return results

    def crc32(self, tensor):
        data = tensor.detach()
        if data.is_meta:
            return "00000000"
        raw = data.cpu().contiguous().reshape(-1).view(torch.uint8).numpy()
        return f"{zlib.crc32(raw) & 0xFFFFFFFF:08x}"

    def copy_for_save(self, tensor):
        data = tensor.detach()
        if data.device.type != "cpu":
            return data.to("cpu")
        return data.clone()

    def save_tensor(self, saved, path):
        # the non-zip format is ~2x faster for the many small files of a dump; torch.load reads both
        torch.save(saved, path, _use_new_zipfile_serialization=False)

    def describe_other(self, value):
        if isinstance(value, torch.dtype):
            return {"type": "torch.dtype", "value": str(value)}
        if isinstance(value, torch.device):
            return {"type": "torch.device", "value": str(value)}
        if isinstance(value, torch.Size):
            return {"type": "torch.Size", "value": list(value)}
        if isinstance(value, torch.memory_format):
            return {"type": "torch.memory_format", "format": str(value).replace("torch.", "")}
        if isinstance(value, torch.layout):
            return {"type": "torch.layout", "value": str(value)}
        if isinstance(value, torch.Generator):
            return {"type": "torch.Generator", "value": str(value.device)}
        return _describe_distributed(value)

    def current_rank(self):
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return dist.get_rank()
        return None


def _describe_distributed(value):
    import torch.distributed as dist

    if not dist.is_available():
        return None
    if isinstance(value, dist.ProcessGroup):
        try:
            ranks = dist.get_process_group_ranks(value)
        except (RuntimeError, ValueError):
            ranks = []
        return {"type": "torch.ProcessGroup", "group_ranks": ranks}
    if isinstance(value, dist.ReduceOp) or type(value).__name__ == "RedOpType":
        return {"type": "torch.distributed.ReduceOp", "value": str(value).split(".")[-1]}
    return None
