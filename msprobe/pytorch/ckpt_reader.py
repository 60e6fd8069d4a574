"""`torch.save` checkpoints for ckpt_compare: loaded with weights_only (no code runs) and memory-mapped when the
file allows it, nested state dicts flattened to dotted keys through the bounded walk (shared references counted
each time they are reached); a tensor whose layout repeats its storage, or that is sparse or quantized, is
skipped with a warning."""
import os
import zipfile
from typing import Dict, List, Optional

import numpy as np

from msprobe.core.bounded_walk import Budget, Walk
from msprobe.core.ckpt_compare.readers import CheckpointError, StoredTensor
from msprobe.core.io.pt_reader import RefusedTensorLayout, check_torch_layout
from msprobe.core.log import logger

__all__ = ["open_torch_checkpoint"]

_BUDGET = Budget(depth=32)


def _is_torch_file(path: str) -> bool:
    if zipfile.is_zipfile(path):
        return True
    with open(path, "rb") as handle:
        return handle.read(1) == b"\x80"  # the legacy format starts with a pickle protocol marker


def _children(value):
    if isinstance(value, dict):
        return value.items()
    if isinstance(value, (list, tuple)) and any(_is_tensor(item) or isinstance(item, dict) for item in value):
        return enumerate(value)
    return None


def _flatten(value, path: str) -> Dict[str, object]:
    """{dotted key: leaf}, within the budget a file of this size is allowed."""
    walk = Walk(path, _BUDGET.for_input(os.path.getsize(path)))
    return {".".join(str(key) for key in keys) or "value": leaf for keys, leaf in walk.leaves(value, _children)}


def _is_tensor(value) -> bool:
    import torch

    return isinstance(value, torch.Tensor)


def _unreadable(tensor) -> Optional[str]:
    """Why a loaded tensor is not compared (None: it is)."""
    import torch

    if tensor.layout != torch.strided:
        return f"a {str(tensor.layout).replace('torch.', '')} tensor"
    if tensor.is_quantized:
        return "a quantized tensor"
    try:
        check_torch_layout(tensor)
    except RefusedTensorLayout as exc:
        return str(exc)
    return None


def _stored(value, path: str = "", key: str = "") -> StoredTensor:
    import torch

    if not isinstance(value, torch.Tensor):
        return StoredTensor(dtype=type(value).__name__, shape=(), value=value)
    tensor = value.detach()
    dtype = str(tensor.dtype).replace("torch.", "")
    shape = tuple(tensor.shape)
    reason = _unreadable(tensor)
    if reason is not None:  # checked before anything is copied: a zero stride would multiply the storage
        logger.warning("%s: '%s' is skipped: %s.", path, key[:120], reason)
        return StoredTensor(dtype=dtype, shape=shape, value=f"(skipped: {reason})")
    if not tensor.is_contiguous():
        tensor = tensor.contiguous()
    if tensor.dtype == torch.bfloat16:
        raw = tensor.view(torch.int16).numpy().view(np.uint16)
    else:
        try:
            raw = tensor.numpy()
        except TypeError:  # float8 and other types numpy lacks: widened (a copy)
            raw = tensor.float().numpy()
    return StoredTensor(dtype=dtype, shape=shape, raw=raw)


class TorchCheckpointReader:
    def __init__(self, path: str):
        import pickle

        import torch

        try:
            try:
                loaded = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
            except RuntimeError as exc:
                if "mmap" not in str(exc):
                    raise
                loaded = torch.load(path, map_location="cpu", weights_only=True)  # legacy format: no mmap
        except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError, zipfile.BadZipFile) as exc:
            raise CheckpointError(f"{path} cannot be loaded with torch.load(weights_only=True): "
                                  f"{' '.join(str(exc).split())[:300]}") from None
        self.path = path
        self._entries: Dict[str, object] = _flatten(loaded, path)

    def keys(self) -> List[str]:
        return list(self._entries)

    def read(self, key: str) -> StoredTensor:
        return _stored(self._entries[key], self.path, key)


def open_torch_checkpoint(path: str) -> Optional[TorchCheckpointReader]:
    """A reader when `path` is a torch.save file, else None."""
    return TorchCheckpointReader(path) if _is_torch_file(path) else None
