"""Check a replayed PyTorch call before it runs: it may only read and write tensors, and every tensor it
makes must fit the element cap.

A dump.json, an online run_ut message or an op_generate extract names an API and its arguments; replaying
it must not reach files, storages, streams or generators, and numbers among the arguments must not make
gigabytes (`torch.full([20000, 20000], 1.0)` is 387 bytes of dump.json). Two checks, both by the ATen
operator schema (`OpOverload._schema`, the public attribute of torch's operator overloads):

- `schema_refusal(op)`: an operator with an argument that is a file name or path (a `str` named like
  one: `filename`, `path`, `file`...), a Storage, Stream, Generator, script object or other handle, or a
  schema that returns nothing and writes no tensor (its only effect is elsewhere: `_print`,
  `_cufft_set_plan_cache_max_size`) is refused. The allow-list applies it to `Aten.*` names at once
  (`effect_refusal`); every other API is checked operator by operator in the sizing run below.
- `check_replayed_call(function, args, kwargs, cap)`: the call runs first with every tensor replaced by
  a meta tensor (shape, strides and dtype, no data) and every device by `meta`, under a dispatch mode that
  sees each ATen operator it reaches: each operator's schema is checked, no tensor or device outside
  `meta` may appear (nothing real runs), and each tensor an operator makes may hold at most
  max(cap, elements of the largest tensor argument) elements. A call that fails on meta is refused with
  one line, except the operators whose output size depends on the data but is bounded by their inputs
  (`nonzero`, `masked_select`, `unique`, boolean indexing): the sizing stops there, as their inputs are
  sized already.
"""
import functools
import re
from typing import Any, Dict, Optional

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from msprobe.core.api_resolver import MAX_MADE_ELEMENTS, PATH_PARAMETER_WORDS
from msprobe.core.errors import UnsupportedError

__all__ = ["ReplayRefused", "schema_refusal", "effect_refusal", "check_replayed_call", "MAX_MADE_ELEMENTS"]


# argument types that are handles to something outside tensors (schema type names)
_HANDLE_TYPES = re.compile(r"\b(Storage|Stream|Generator|Capsule|AnyClassType|Future|Await|RRef|Any|Object)\b"
                           r"|__torch__")
# a str argument named like a file name or a path
_PATH_NAMES = re.compile(PATH_PARAMETER_WORDS + r"|^name$", re.IGNORECASE)
# operators whose output size depends on the values but never exceeds what their inputs bound
_BOUNDED_BY_INPUTS = frozenset(("nonzero", "argwhere", "masked_select", "_unique", "_unique2", "unique_consecutive",
                                "unique_dim", "unique_dim_consecutive", "index", "nonzero_numpy"))


class ReplayRefused(UnsupportedError):
    """A replayed call refused before it ran: an effect outside tensors, or an output over the cap."""


@functools.lru_cache(maxsize=None)  # one answer per operator overload
def schema_refusal(op) -> str:
    """Why the ATen operator overload `op` may not be replayed ('' when it reads and writes tensors only)."""
    schema = op._schema
    for argument in schema.arguments:
        kind = str(argument.type)
        if _HANDLE_TYPES.search(kind):
            return f"its argument '{argument.name}' is a {kind}, a handle outside tensors"
        if "str" in kind and _PATH_NAMES.search(argument.name):
            return f"its argument '{argument.name}' is a file name or path"
        alias = argument.alias_info
        if alias is not None and alias.is_write and "Tensor" not in kind:
            return f"it writes its argument '{argument.name}' ({kind}), which is not a tensor"
    for returned in schema.returns:
        if _HANDLE_TYPES.search(str(returned.type)):
            return f"it returns a {returned.type}, a handle outside tensors"
    writes_tensor = any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments)
    if not schema.returns and not writes_tensor:
        return "it returns nothing and writes no tensor: its only effect is outside tensors"
    return ""


def _overloads(packet):
    for name in packet.overloads():
        overload = getattr(packet, name, None)
        if overload is not None:
            yield overload


def effect_refusal(function) -> str:
    """The schema refusal of an allow-listed `Aten.*` callable: an overload (torch.ops.aten.from_file.default)
    by its schema; a packet (torch.ops.aten.from_file) when every overload is refused (one that is not is
    checked again, with its arguments, when the call is sized). '' for other callables."""
    if isinstance(function, torch._ops.OpOverload):
        return schema_refusal(function)
    if isinstance(function, torch._ops.OpOverloadPacket):
        reasons = [schema_refusal(overload) for overload in _overloads(function)]
        if reasons and all(reasons):
            return reasons[0]
    return ""


def _name(op) -> str:
    return str(getattr(op, "_name", op))


class _NotSizable(Exception):
    """The sizing run met something it must not run (a real tensor or device)."""


class _StopSizing(Exception):
    """An operator whose output size depends on data bounded by its (already sized) inputs."""


class _SizingMode(TorchDispatchMode):
    """Sees every ATen operator of the sizing run: schema, meta-only arguments, sizes of what it makes."""

    def __init__(self, cap: int):
        super().__init__()
        self.cap = cap
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        reason = schema_refusal(func)
        if reason:
            raise ReplayRefused(f"{_name(func)}: {reason}; refused, nothing was run")
        for leaf in tree_flatten((args, kwargs))[0]:
            if isinstance(leaf, torch.Tensor) and leaf.device.type != "meta":
                raise _NotSizable(f"{_name(func)} met a tensor on {leaf.device}")
            if isinstance(leaf, torch.device) and leaf.type != "meta":
                raise _NotSizable(f"{_name(func)} asked for device {leaf}")
        if kwargs.get("device") is None and "device" in {a.name for a in func._schema.arguments} \
                and not any(isinstance(leaf, torch.Tensor) for leaf in tree_flatten((args, kwargs))[0]):
            kwargs = dict(kwargs, device=torch.device("meta"))  # a factory: meta, whatever the default device
        try:
            result = func(*args, **kwargs)
        except Exception:
            if func._schema.name.split("::")[-1] in _BOUNDED_BY_INPUTS and torch.Tag.dynamic_output_shape in func.tags:
                raise _StopSizing() from None
            raise
        for leaf in tree_flatten(result)[0]:
            if isinstance(leaf, torch.Tensor):
                if leaf.device.type != "meta":
                    raise _NotSizable(f"{_name(func)} made a tensor on {leaf.device}")
                if leaf.numel() > max(self.cap, self.largest):
                    raise ReplayRefused(f"{_name(func)} would make a tensor of shape {list(leaf.shape)[:8]} "
                                        f"({leaf.numel()} elements), over the cap of {max(self.cap, self.largest)}"
                                        "; refused, nothing was run")
        return result


# what an argument of a replayed call may be besides tensors and containers of them (run_ut builds no other)
_PLAIN = (bool, int, float, complex, str, type(None), slice, type(Ellipsis), torch.dtype, torch.device, torch.layout,
          torch.memory_format)


def _signature(value):
    """A hashable description of one argument that the sizing run depends on (a tensor's shape, strides and
    dtype; a plain value itself); anything else (a storage, a stream, a file) is refused."""
    if isinstance(value, torch.Tensor):
        return ("tensor", tuple(value.shape), tuple(value.stride()), value.dtype)
    if isinstance(value, (list, tuple)):
        kind = "size" if isinstance(value, torch.Size) else type(value).__name__
        return (kind, tuple(_signature(item) for item in value))
    if isinstance(value, dict):
        return ("dict", tuple((key, _signature(item)) for key, item in value.items()))
    if isinstance(value, _PLAIN):
        return ("value", type(value).__name__, value)
    raise ReplayRefused(f"an argument is a {type(value).__name__}, not a tensor or a plain value; "
                        "refused, nothing was run")


def _device_text(value):
    try:
        torch.device(value)
    except (RuntimeError, ValueError):
        return value
    return "meta"  # 'cpu', 'cuda:0' as an argument (Tensor.to('cpu')): the sizing stays on meta


def _meta(signature):
    """The meta twin of an argument from its signature: tensors on meta, devices meta, values as they are."""
    kind, *rest = signature
    if kind == "tensor":
        shape, stride, dtype = rest
        return torch.empty_strided(shape, stride, dtype=dtype, device="meta")
    if kind == "size":
        return torch.Size(_meta(item) for item in rest[0])
    if kind in ("list", "tuple"):
        items = [_meta(item) for item in rest[0]]
        return items if kind == "list" else tuple(items)
    if kind == "dict":
        return {key: _meta(item) for key, item in rest[0]}
    value = rest[1]
    if isinstance(value, torch.device):
        return torch.device("meta")
    return _device_text(value) if isinstance(value, str) else value


def _elements(signature):
    kind, *rest = signature
    if kind == "tensor":
        return max(1, int(torch.Size(rest[0]).numel())) if rest[0] else 1
    if kind in ("list", "tuple", "size"):
        return max((_elements(item) for item in rest[0]), default=0)
    if kind == "dict":
        return max((_elements(item) for _, item in rest[0]), default=0)
    return 0


@functools.lru_cache(maxsize=4096)
def _sizing_refusal(function, arguments, cap: int) -> str:
    """'' when the call of these argument signatures may run, else the one-line refusal (without the API
    name). Cached: a dump repeats the same calls (every layer of a model) and the answer depends only on this."""
    args, kwargs = arguments
    mode = _SizingMode(cap)
    mode.largest = max(_elements(args), _elements(kwargs))
    try:
        with torch.no_grad(), torch.device("meta"), mode:  # factories without a device: meta too
            function(*_meta(args), **_meta(kwargs))
    except ReplayRefused as exc:
        return str(exc)
    except _StopSizing:
        return ""
    except _NotSizable as exc:
        return f"cannot be sized before it runs ({exc}): refused, nothing was run"
    except Exception as exc:  # noqa: BLE001 - a call that fails on meta cannot be sized
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]
        if isinstance(exc, NotImplementedError) or "meta" in first.lower():
            return f"cannot be sized on the meta device ({type(exc).__name__}: {first}): refused, nothing was run"
        # the arguments themselves are wrong (shapes that do not match): the real call would fail alike
        return f"run failed: {type(exc).__name__}: {first} (found sizing it on the meta device; nothing was run)"
    return ""


def check_replayed_call(function, args, kwargs: Optional[Dict[str, Any]], cap: int = MAX_MADE_ELEMENTS,
                        api_name: str = "") -> None:
    """Raise ReplayRefused (one line) unless `function(*args, **kwargs)` reads and writes tensors only and
    every tensor it makes holds at most max(`cap`, elements of its largest tensor argument) elements,
    found by running it on the meta device first. Nothing of the real call runs here."""
    shown = api_name or getattr(function, "__name__", "the call")
    try:
        arguments = (_signature(list(args)), _signature(dict(kwargs or {})))
        reason = _sizing_refusal(function, arguments, cap)
    except ReplayRefused as exc:
        reason = str(exc)
    except TypeError:  # an unhashable function or value: sized without the cache
        reason = _sizing_refusal.__wrapped__(function, arguments, cap)
    if reason:
        raise ReplayRefused(reason if reason.startswith("run failed") else f"{shown}: {reason}")
