"""Read dumped tensor files (.pt, .npy) as numpy arrays: no unpickling, torch imported only when needed.

`register_loader(suffix, fn)` lets a framework adapter read its own file type.
"""
import os

import numpy as np

from msprobe.core.io.pt_reader import RefusedTensorLayout, UnreadableTensorFile, check_torch_layout, read_pt
from msprobe.core.log import logger

__all__ = ["load_tensor", "register_loader", "first_line", "UnreadableTensorFile"]

_LOADERS: dict = {}


def register_loader(suffix, loader):
    """Let a framework adapter read its own tensor file type: loader(path) -> numpy array."""
    _LOADERS[suffix] = loader


def first_line(exc):
    """The first line of an exception's text (its type's name if empty), at most 300 characters."""
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]


def _load_pt(path, why_not_plain):
    """torch.load(weights_only=True): tensors our reader does not know (subclasses, Parameters).
    It runs no code from the file either; anything it refuses is reported with our reader's reason."""
    try:
        import torch
    except ImportError:
        raise UnreadableTensorFile(why_not_plain) from None
    try:
        try:  # mmap: the numpy view reads the page cache directly instead of copying every tensor
            tensor = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        except RuntimeError:  # legacy (non-zip) .pt files cannot be mapped
            tensor = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many kinds; every one means "not a tensor we may read"
        logger.debug("torch.load(weights_only=True) refused %s: %s", path, first_line(exc))
        raise UnreadableTensorFile(why_not_plain) from None
    if not isinstance(tensor, torch.Tensor):
        raise UnreadableTensorFile(f"it holds a {type(tensor).__name__}, not a tensor")
    check_torch_layout(tensor)
    tensor = tensor.detach()
    if tensor.dtype in (torch.bfloat16, torch.float16):
        tensor = tensor.float()
    elif tensor.is_complex():
        tensor = torch.view_as_real(tensor)
    return tensor.numpy()


def load_tensor(path):
    """The tensor stored at `path` as a numpy array (bf16/fp16 widened to float32)."""
    suffix = os.path.splitext(path)[1]
    if suffix in _LOADERS:
        return _LOADERS[suffix](path)
    if suffix == ".pt":
        try:  # plain tensors need no torch import (seconds per worker) and are memory-mapped
            array = read_pt(path)
            return array.astype(np.float32) if array.dtype == np.float16 else array
        except RefusedTensorLayout:
            raise
        except UnreadableTensorFile as exc:
            return _load_pt(path, str(exc))
    try:
        array = np.load(path, allow_pickle=False)  # never unpickle: an object array is refused
    except ValueError as exc:
        raise UnreadableTensorFile(first_line(exc)) from None
    except (OSError, EOFError) as exc:
        raise UnreadableTensorFile(f"not a readable .npy file ({first_line(exc)})") from None
    if not isinstance(array, np.ndarray):  # np.load of an .npz archive
        raise UnreadableTensorFile("it is not a single array")
    return array.astype(np.float32) if array.dtype == np.float16 else array
