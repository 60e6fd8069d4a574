"""Rebuild the arguments of a recorded PyTorch API call, once for the device and once for the benchmark.

Tensors come from the dump (tensor task, `data_name` files) or are drawn from the recorded statistics
(statistics task, seeded by the API name). The device copy keeps the recorded dtype; the bench copy
holds the same values upcast (bfloat16/float16 -> float32, float32 -> float64) on the CPU.
"""
import numpy as np
import torch

from msprobe.core.errors import UnsupportedError
from msprobe.core.io.pt_reader import RefusedTensorLayout, check_torch_layout
from msprobe.core.naming import is_tensor_descriptor
from msprobe.core.run_ut.arg_template import plain_scalar, tensor_file_path
from msprobe.core.run_ut.random_data import random_values, rng_for

__all__ = ["BENCH_DTYPE", "torch_dtype", "CallArgs", "build_call_args", "build_grads",
           "bench_copy", "flatten_tensors"]

BENCH_DTYPE = {torch.bfloat16: torch.float32, torch.float16: torch.float32, torch.float32: torch.float64}


def torch_dtype(name):
    """'torch.bfloat16' -> torch.bfloat16."""
    value = getattr(torch, str(name).rsplit(".", 1)[-1], None)
    if not isinstance(value, torch.dtype):
        raise UnsupportedError(f"unknown tensor dtype {name!r}")
    return value


def _torch_constant(name, kind):
    """torch.channels_last / torch.strided from its recorded name; a name of anything else (torch.save,
    torch.os) is refused, never passed to the API."""
    value = getattr(torch, str(name).rsplit(".", 1)[-1], None)
    if not isinstance(value, kind):
        raise UnsupportedError(f"unknown {kind.__name__} {str(name)[:80]!r}")
    return value


def _load_tensor(record, tensor_dir):
    """The tensor of a `data_name` file: a plain file name inside tensor_dir, read with weights_only
    (a crafted file can name no function to call)."""
    name = record["data_name"]
    path = tensor_file_path(tensor_dir, name)
    try:
        tensor = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - torch raises UnpicklingError, RuntimeError, EOFError, ...
        first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise UnsupportedError(f"tensor file {name} cannot be read safely: {first_line[:200]}") from None
    if not isinstance(tensor, torch.Tensor):
        raise UnsupportedError(f"tensor file {name} holds a {type(tensor).__name__}, not a tensor")
    try:
        check_torch_layout(tensor)  # zero strides would make every copy of a few bytes gigabytes
    except RefusedTensorLayout as exc:
        raise UnsupportedError(f"tensor file {name}: {exc}") from None
    return tensor


def _make_tensor(record, rng, tensor_dir, device):
    dtype = torch_dtype(record.get("dtype", "torch.float32"))
    if tensor_dir and record.get("data_name"):
        tensor = _load_tensor(record, tensor_dir).to(dtype)
    else:
        if dtype.is_complex:
            raise UnsupportedError(f"complex input ({dtype}) cannot be generated from statistics")
        tensor = torch.from_numpy(np.array(random_values(record, rng), order="C")).to(dtype)
    return tensor.to(device)


def _scalar(node, device):
    kind, value = node.get("type"), node.get("value")
    if kind in ("int", "float", "bool", "str", "slice", "ellipsis", "Ellipsis"):
        return plain_scalar(node)
    if kind in ("NoneType", None) and "value" in node:
        return value
    if kind == "torch.dtype":
        return torch_dtype(value)
    if kind == "torch.Size":
        return torch.Size(value)
    if kind == "torch.device":
        return torch.device(device)
    if kind == "torch.memory_format":
        return _torch_constant(node.get("format") or value, torch.memory_format)
    if kind == "torch.layout":
        return _torch_constant(value, torch.layout)
    raise UnsupportedError(f"argument of type {kind!r} cannot be rebuilt")


class CallArgs:
    """args/kwargs of one call plus the leaf tensors that receive gradients (in argument order)."""

    def __init__(self, args, kwargs, leaves):
        self.args, self.kwargs, self.leaves = args, kwargs, leaves


def build_call_args(record, name, tensor_dir, device, with_grad, seed=None):
    """Device CallArgs of a forward record; float tensors require grad when `with_grad`.
    Random data is seeded from the API name, or from `seed` when given (op_generate scripts)."""
    rng = rng_for(f"{name}.forward") if seed is None else np.random.default_rng(seed)
    leaves = []

    def build(node):
        if isinstance(node, list):
            return [build(item) for item in node]
        if isinstance(node, dict) and is_tensor_descriptor(node):
            tensor = _make_tensor(node, rng, tensor_dir, device)
            if with_grad and tensor.is_floating_point() and node.get("requires_grad", True) is not False:
                tensor.requires_grad_(True)
                leaves.append(tensor)
            return tensor
        if isinstance(node, dict) and "type" not in node:
            return {key: build(value) for key, value in node.items()}
        return None if node is None else _scalar(node, device)

    args = build(record.get("input_args") or [])
    kwargs = {key: build(value) for key, value in (record.get("input_kwargs") or {}).items()}
    return CallArgs(args, kwargs, leaves)


def bench_copy(call):
    """CallArgs with every tensor copied to the CPU and upcast; leaves map to new leaves."""
    leaves = []
    index = {id(leaf): i for i, leaf in enumerate(call.leaves)}
    mapped = [None] * len(call.leaves)

    def copy(node):
        if isinstance(node, torch.Tensor):
            out = node.detach().to("cpu").to(BENCH_DTYPE.get(node.dtype, node.dtype), copy=True)
            if id(node) in index:
                out.requires_grad_(True)
                mapped[index[id(node)]] = out
            return out
        if isinstance(node, list):
            return [copy(item) for item in node]
        if isinstance(node, dict):
            return {key: copy(value) for key, value in node.items()}
        if isinstance(node, torch.device):
            return torch.device("cpu")
        return node

    args, kwargs = copy(call.args), copy(call.kwargs)
    leaves = [leaf for leaf in mapped if leaf is not None]
    return CallArgs(args, kwargs, leaves)


def build_grads(backward_record, name, outputs, tensor_dir, seed=None):
    """Gradients for the forward outputs (device dtype/device), None where no gradient is recorded."""
    rng = rng_for(f"{name}.backward") if seed is None else np.random.default_rng(seed + 1)
    records = list((backward_record or {}).get("input") or [])
    grads = []
    for position, output in enumerate(outputs):
        record = records[position] if position < len(records) else None
        if not isinstance(output, torch.Tensor) or not is_tensor_descriptor(record):
            grads.append(None)
            continue
        grad = _make_tensor(record, rng, tensor_dir, output.device)
        grads.append(grad.to(output.dtype).reshape(output.shape) if grad.numel() == output.numel() else None)
    return grads


def flatten_tensors(value):
    """Outputs flattened in order: tensors and Python numbers; None entries are dropped."""
    if isinstance(value, (list, tuple)):
        items = []
        for item in value:
            items.extend(flatten_tensors(item))
        return items
    if value is None:
        return []
    return [value]
