"""`torch.save` checkpoints for ckpt_compare: loaded with weights_only (no code runs) and memory-mapped when the
file allows it, nested state dicts flattened to dotted keys."""
import zipfile
from typing import Dict, List, Optional

import numpy as np

from msprobe.core.ckpt_compare.readers import CheckpointError, StoredTensor

__all__ = ["open_torch_checkpoint"]

_MAX_DEPTH = 32


def _is_torch_file(path: str) -> bool:
    if zipfile.is_zipfile(path):
        return True
    with open(path, "rb") as handle:
        return handle.read(1) == b"\x80"  # the legacy format starts with a pickle protocol marker


def _flatten(value, prefix: str, out: Dict[str, object], depth: int = 0) -> None:
    if depth > _MAX_DEPTH:
        raise CheckpointError(f"checkpoint nests deeper than {_MAX_DEPTH} levels at '{prefix[:120]}'.")
    if isinstance(value, dict):
        for key, item in value.items():
            _flatten(item, f"{prefix}.{key}" if prefix else str(key), out, depth + 1)
    elif isinstance(value, (list, tuple)) and any(_is_tensor(item) or isinstance(item, dict) for item in value):
        for n, item in enumerate(value):
            _flatten(item, f"{prefix}.{n}" if prefix else str(n), out, depth + 1)
    else:
        out[prefix or "value"] = value


def _is_tensor(value) -> bool:
    import torch

    return isinstance(value, torch.Tensor)


def _stored(value) -> StoredTensor:
    import torch

    if not isinstance(value, torch.Tensor):
        return StoredTensor(dtype=type(value).__name__, shape=(), value=value)
    tensor = value.detach()
    dtype = str(tensor.dtype).replace("torch.", "")
    shape = tuple(tensor.shape)
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
        self._entries: Dict[str, object] = {}
        _flatten(loaded, "", self._entries)

    def keys(self) -> List[str]:
        return list(self._entries)

    def read(self, key: str) -> StoredTensor:
        return _stored(self._entries[key])


def open_torch_checkpoint(path: str) -> Optional[TorchCheckpointReader]:
    """A reader when `path` is a torch.save file, else None."""
    return TorchCheckpointReader(path) if _is_torch_file(path) else None
