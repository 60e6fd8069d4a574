"""Name table for API-level dump: the function object -> "Functional.linear", "Tensor.add", ...

Built from the live torch modules: every public function of torch.nn.functional, the public
torch.* functions torch marks as overridable, the Tensor methods and operators of the reference's
list (support_wrap_ops.yaml, shipped next to this file), torch_npu ops when installed. Lookups are
by object identity, so `from torch import relu` and `F.relu` are seen alike. Where one object
lives in two namespaces (F.conv2d is torch.conv2d) the Functional name wins.
"""
import functools
import os

import torch

from msprobe.core.naming import dotted_attribute
from msprobe.core.paths import load_yaml

__all__ = ["api_table", "distributed_api_names", "is_inplace_api", "SUPPORT_YAML"]

SUPPORT_YAML = os.path.join(os.path.dirname(os.path.abspath(__file__)), "support_wrap_ops.yaml")

# metadata queries and autograd plumbing: not numerical APIs, recording them is only noise
_NOT_APIS = {
    "size", "dim", "numel", "stride", "storage", "data_ptr", "element_size", "item", "tolist", "nelement",
    "ndimension", "get_device", "type", "backward", "register_hook", "retain_grad", "requires_grad_",
    "has_names", "storage_offset", "untyped_storage", "is_contiguous", "is_complex", "is_floating_point",
    "is_nonzero", "is_same_size", "is_signed", "is_tensor", "is_storage", "numpy", "result_type",
    "can_cast", "promote_types", "get_default_dtype", "set_default_dtype", "is_grad_enabled",
    "compile", "load", "save", "manual_seed", "seed", "initial_seed", "typename", "broadcast_shapes",
    "is_inference_mode_enabled", "is_autocast_enabled", "set_grad_enabled", "no_grad", "enable_grad",
    "inference_mode", "chunk_size", "is_inference", "cond", "vmap", "while_loop", "use_deterministic_algorithms",
    "are_deterministic_algorithms_enabled", "is_warn_always_enabled", "sym_int", "sym_float", "sym_max",
    "sym_min", "sym_not", "sym_ite", "sym_sum", "sym_fresh_size", "unravel_index", "get_num_threads",
    "set_num_threads", "device", "dtype", "finfo", "iinfo", "Size",
}


# reflected operators reach __torch_function__ under their own names (`1 - x` -> Tensor.__rsub__)
_REFLECTED = ["__radd__", "__rsub__", "__rmul__", "__rtruediv__", "__rdiv__", "__rpow__", "__rmatmul__",
              "__rfloordiv__", "__rmod__", "__rand__", "__ror__", "__rxor__", "__rlshift__", "__rrshift__"]


@functools.lru_cache(maxsize=1)
def _reference_lists():
    try:
        import yaml

        loader = getattr(yaml, "CSafeLoader", None)  # the C loader is ~20x faster on this 2000-line list
        if loader is None:
            data = load_yaml(SUPPORT_YAML, what="API list") or {}
        else:
            with open(SUPPORT_YAML, encoding="utf-8") as handle:
                data = yaml.load(handle, Loader=loader) or {}
    except Exception:  # the list only adds names; the live modules are enough to work
        data = {}
    return {key: list(value or []) for key, value in data.items()}


def _add(table, obj, name):
    if obj is None or not callable(obj) or isinstance(obj, type):
        return
    try:
        table.setdefault(obj, name)
    except TypeError:  # unhashable callables cannot be looked up by identity anyway
        pass


@functools.lru_cache(maxsize=1)
def api_table():
    """{function object: "Prefix.api"} for every API the L1 dump records."""
    import torch.nn.functional as F

    lists = _reference_lists()
    table = {}
    functional = set(lists.get("functional", [])) | {n for n in dir(F) if not n.startswith("_")}
    for name in sorted(functional - _NOT_APIS):
        _add(table, getattr(F, name, None), f"Functional.{name}")
    torch_names = set(lists.get("torch", []))
    overridable = torch.overrides.get_overridable_functions().get(torch, [])
    torch_names |= {fn.__name__ for fn in overridable if not fn.__name__.startswith("_")}
    for name in sorted(torch_names):
        if name.split(".")[-1] in _NOT_APIS or name.startswith("is_"):
            continue
        _add(table, dotted_attribute(torch, name), f"Torch.{name}")
    tensor_names = list(lists.get("tensor", [])) + [n for n in _REFLECTED if n not in lists.get("tensor", [])]
    for name in tensor_names:
        obj = getattr(torch.Tensor, name, None)
        _add(table, obj, f"Tensor.{name}")
        _add(table, getattr(torch._C.TensorBase, name, None) if obj is None else None, f"Tensor.{name}")
    for name in lists.get("_VF", []):
        _add(table, getattr(torch._VF, name, None), f"VF.{name}")
    _add_npu(table, lists.get("torch_npu", []))
    return table


def _add_npu(table, names):
    try:
        import torch_npu  # noqa: F401  (only present on Ascend machines)
    except ImportError:
        return
    for name in names:
        _add(table, getattr(torch_npu, name, None), f"NPU.{name}")


def distributed_api_names():
    """Collectives recorded as "Distributed.<name>" (they bypass __torch_function__)."""
    lists = _reference_lists()
    return list(lists.get("distributed", [])) or [
        "send", "recv", "broadcast", "all_reduce", "reduce", "all_gather", "gather", "isend", "irecv",
        "scatter", "reduce_scatter", "all_to_all_single", "all_to_all", "all_gather_into_tensor",
        "reduce_scatter_tensor", "barrier"]


def is_inplace_api(key, kwargs):
    """Whether the call modifies its first argument (self) in place."""
    api = key.rsplit(".", 1)[-1]
    if api.startswith("__i") and api.endswith("__"):
        return True
    if api in ("__setitem__", "copy_"):
        return True
    return (api.endswith("_") and not api.endswith("__")) or bool(kwargs and kwargs.get("inplace"))
