"""One intercepted ATen call as plain data, and its wire form between the training process and workers.

`OpCall` holds detached CPU copies of the inputs (taken before the op ran) and of the device outputs, so
it can be checked later or elsewhere. The wire form replaces every tensor by `WireTensor` (dtype name,
shape, raw bytes) and is read back with an unpickler that only knows `WireTensor` and torch's dtype,
device, layout and memory-format constants: a message can rebuild data, never run code.
"""
import builtins
import functools
import io
import pickle
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import torch
from torch.utils._pytree import tree_map

__all__ = ["OpCall", "WireTensor", "encode_call", "decode_message", "encode_message", "resolve_op",
           "tensor_to_numpy"]


@dataclass
class OpCall:
    """An ATen call: `op` is the qualified overload name ('aten::addmm', 'aten::add.Tensor')."""
    op: str
    name: str
    index: int
    direction: str
    args: Tuple[Any, ...]
    kwargs: Dict[str, Any]
    outputs: List[Optional[torch.Tensor]]
    dump: bool = False
    sequence: int = 0
    extra: Dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.name}_{self.index}"


@functools.lru_cache(maxsize=None)
def resolve_op(qualified: str) -> torch._ops.OpOverload:
    """'aten::add.Tensor' -> torch.ops.aten.add.Tensor ('aten::addmm' -> .default), only for operators the
    dispatcher has registered (msprobe.core.api_resolver): a received 'load_library::__self__...' is
    refused, never walked; so is an operator whose schema has an effect outside tensors (replay_guard)."""
    from msprobe.core.api_resolver import ApiAllowList, resolve
    from msprobe.pytorch.api_accuracy_checker.replay_guard import effect_refusal
    from msprobe.pytorch.dump.api_names import operator_table

    namespace, _, rest = str(qualified).partition("::")
    packet_name, _, overload = rest.partition(".")
    allow = ApiAllowList("pytorch operators", {"Operator": operator_table()}, refusal=effect_refusal)
    return resolve(allow, "Operator", f"{namespace}.{packet_name}.{overload or 'default'}", warn=False)


def tensor_to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """A CPU numpy copy-or-view; bf16 (unknown to numpy) widened to float32, which is exact."""
    tensor = tensor.detach()
    if tensor.device.type != "cpu":
        tensor = tensor.cpu()
    if tensor.dtype == torch.bfloat16:
        tensor = tensor.float()
    elif tensor.is_complex():
        tensor = torch.view_as_real(tensor)
    return tensor.resolve_conj().resolve_neg().numpy()


class WireTensor:
    """A tensor as dtype name, shape and C-contiguous bytes (bf16 travels as its 16-bit patterns)."""

    __slots__ = ("dtype", "shape", "data")

    def __init__(self, dtype: str, shape: Tuple[int, ...], data: bytes):
        self.dtype, self.shape, self.data = dtype, shape, data

    @classmethod
    def from_tensor(cls, tensor: torch.Tensor) -> "WireTensor":
        tensor = tensor.detach().cpu().contiguous()
        dtype = str(tensor.dtype).rsplit(".", 1)[-1]
        raw = tensor.view(torch.int16) if tensor.dtype == torch.bfloat16 else tensor
        return cls(dtype, tuple(tensor.shape), raw.numpy().tobytes())

    def to_tensor(self) -> torch.Tensor:
        torch_dtype = getattr(torch, self.dtype)
        if not self.data:  # an empty tensor (torch.frombuffer refuses an empty buffer, bf16 included)
            return torch.empty(self.shape, dtype=torch_dtype)
        if torch_dtype == torch.bfloat16:
            flat = torch.frombuffer(bytearray(self.data), dtype=torch.int16).view(torch.bfloat16)
        else:
            flat = torch.frombuffer(bytearray(self.data), dtype=torch_dtype)
        return flat.reshape(self.shape)

    def __reduce__(self):
        return WireTensor, (self.dtype, self.shape, self.data)


_TORCH_CONSTANTS = (torch.dtype, torch.device, torch.layout, torch.memory_format)


class _RestrictedUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if module == __name__ and name == "WireTensor":
            return WireTensor
        if module == "torch":
            value = getattr(torch, name, None)
            if name in ("device", "Size") or isinstance(value, _TORCH_CONSTANTS):
                return value
        if module == "builtins" and name in ("complex", "slice"):
            return getattr(builtins, name)
        raise pickle.UnpicklingError(f"online_dispatch messages may not contain {module}.{name}")


def _to_wire(value):
    return WireTensor.from_tensor(value) if isinstance(value, torch.Tensor) else value


def _from_wire(value):
    return value.to_tensor() if isinstance(value, WireTensor) else value


def encode_message(obj) -> bytes:
    """Pickle plain data (containers, numbers, strings, WireTensor, torch constants)."""
    return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


def decode_message(data: bytes):
    """Read a message written by `encode_message`; anything else is refused."""
    return _RestrictedUnpickler(io.BytesIO(data)).load()


def encode_call(call: OpCall) -> bytes:
    payload = {"op": call.op, "name": call.name, "index": call.index, "direction": call.direction,
               "args": tree_map(_to_wire, call.args), "kwargs": tree_map(_to_wire, call.kwargs),
               "outputs": [_to_wire(t) for t in call.outputs], "dump": call.dump, "sequence": call.sequence}
    return encode_message(payload)


def call_from_payload(payload: Dict[str, Any]) -> OpCall:
    return OpCall(payload["op"], payload["name"], payload["index"], payload["direction"],
                  tree_map(_from_wire, payload["args"]), tree_map(_from_wire, payload["kwargs"]),
                  [_from_wire(t) for t in payload["outputs"]], payload["dump"], payload["sequence"])
