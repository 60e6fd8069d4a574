"""Read one dumped tensor file (.npy, .pt) safely as a numpy array, with the dtype it was saved in.

.npy is read with `allow_pickle=False`; .pt with msprobe's restricted unpickler (core.io.pt_reader),
falling back to `torch.load(weights_only=True)` when torch is installed. Nothing in a file can run code.
"""
import io
import os
import pickletools
import zipfile
from typing import NamedTuple

import numpy as np

from msprobe.core.errors import ParseError
from msprobe.core.io.pt_reader import RefusedTensorLayout, UnreadableTensorFile, check_torch_layout, read_pt
from msprobe.core.paths import check_path

__all__ = ["TensorFile", "read_tensor_file", "TENSOR_SUFFIXES", "describe"]

TENSOR_SUFFIXES = (".npy", ".pt")


class TensorFile(NamedTuple):
    path: str
    array: np.ndarray   # bf16 widened to float32 (exact); the saved dtype is in `dtype`
    dtype: str


def _names_bfloat16(stream) -> bool:
    """Whether one pickle names torch.BFloat16Storage; its opcodes are read, never run."""
    strings: list = []
    for opcode, arg, _ in pickletools.genops(stream):  # stops after the pickle's STOP
        if opcode.name == "GLOBAL" and arg == "torch BFloat16Storage":
            return True
        if opcode.name == "STACK_GLOBAL" and strings[-2:] == ["torch", "BFloat16Storage"]:
            return True
        if isinstance(arg, str):
            strings.append(arg)
    return False


def _pt_is_bfloat16(path: str) -> bool:
    """Whether a .pt file (zip archive or the legacy stream msprobe's dump writes) holds a bf16 tensor."""
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                pickles = [n for n in archive.namelist() if n.endswith("/data.pkl")]
                return len(pickles) == 1 and _names_bfloat16(io.BytesIO(archive.read(pickles[0])))
        with open(path, "rb") as handle:
            for _ in range(3):  # magic number, protocol version, system info
                for _ in pickletools.genops(handle):
                    pass
            return _names_bfloat16(handle)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        return False


def _read_pt_with_torch(path: str) -> TensorFile:
    try:
        import torch
    except ImportError:
        raise ParseError(f"'{path}' is not a plain tensor file that msprobe can read without torch.") from None
    try:
        tensor = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]  # torch's EOF error has no text
        raise ParseError(f"'{path}' cannot be read as a tensor file: {reason}") from None
    if not isinstance(tensor, torch.Tensor):
        raise ParseError(f"'{path}' holds a {type(tensor).__name__}, not a tensor.")
    try:
        check_torch_layout(tensor)
    except RefusedTensorLayout as exc:
        raise ParseError(f"'{path}' cannot be read as a tensor file: {exc}") from None
    dtype = str(tensor.dtype).rsplit(".", 1)[-1]
    tensor = tensor.detach()
    if tensor.dtype == torch.bfloat16:
        tensor = tensor.float()
    return TensorFile(path, tensor.numpy(), dtype)


def read_tensor_file(path: str) -> TensorFile:
    """The tensor stored at `path`; a missing, wrong-kind or corrupt file raises a one-line error."""
    full = check_path(path, kind="file", what="tensor file", allow_symlink=True)
    suffix = os.path.splitext(full)[1].lower()
    if suffix not in TENSOR_SUFFIXES:
        raise ParseError(f"'{path}' is not a .npy or .pt file.")
    if suffix == ".npy":
        try:
            array = np.load(full, allow_pickle=False)
        except ValueError as exc:  # object arrays need pickle: refused
            raise ParseError(f"'{path}' cannot be read safely: {exc}") from None
        except (OSError, EOFError) as exc:
            raise ParseError(f"'{path}' is not a valid .npy file: {exc}") from None
        return TensorFile(full, array, str(array.dtype))
    try:
        array = np.asarray(read_pt(full))
    except RefusedTensorLayout as exc:
        raise ParseError(f"'{path}' cannot be read as a tensor file: {exc}") from None
    except UnreadableTensorFile:
        return _read_pt_with_torch(full)
    return TensorFile(full, array, "bfloat16" if _pt_is_bfloat16(full) else str(array.dtype))


def describe(tensor: TensorFile) -> str:
    """'[Shape: (2, 3)] [Dtype: float32] [Max: 1.5] [Min: -2] [Mean: 0.25]' (statistics of finite values)."""
    array = tensor.array
    if array.size == 0:
        return f"[Shape: {array.shape}] [Dtype: {tensor.dtype}] [empty]"
    if array.dtype == np.bool_:
        array = array.astype(np.int64)
    values = array.astype(np.float64)
    return (f"[Shape: {array.shape}] [Dtype: {tensor.dtype}] [Max: {values.max():.8g}] [Min: {values.min():.8g}] "
            f"[Mean: {values.mean():.8g}]")
