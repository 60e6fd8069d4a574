"""Name table for API-level dump: the function object -> "Functional.linear", "Tensor.add", ...; and the
allow-list that names from dumps and messages resolve through (`api_allow_list`, the same tables).

Built from the live torch modules: every public function of torch.nn.functional, the public
torch.* functions torch marks as overridable, the multi-tensor functions torch.optim calls (`torch._foreach_*`
and the fused optimizer steps `torch._fused_adamw_`, `_fused_adam_`, `_fused_sgd_`, `_fused_adagrad_`), the
Tensor methods and operators of the reference's list (support_wrap_ops.yaml, shipped next to this file), torch_npu
ops when installed. Lookups are
by object identity, so `from torch import relu` and `F.relu` are seen alike. Where one object
lives in two namespaces (F.conv2d is torch.conv2d) the Functional name wins.
"""
import functools
import os
from collections.abc import Mapping

import torch

from msprobe.core.api_resolver import ApiAllowList, in_framework
from msprobe.core.errors import ParseError
from msprobe.core.naming import dotted_attribute
from msprobe.core.paths import load_yaml

__all__ = ["api_table", "api_allow_list", "operator_table", "operator_names", "distributed_api_names",
           "load_api_lists", "optimizer_api_names", "SUPPORT_YAML"]

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
    # torch.nn.functional's dispatch helpers and re-exports: plumbing, never a recorded API
    "Optional", "handle_torch_function", "has_torch_function", "has_torch_function_unary",
    "has_torch_function_variadic", "boolean_dispatch", "assert_int_or_pair",
}


# reflected operators reach __torch_function__ under their own names (`1 - x` -> Tensor.__rsub__)
_REFLECTED = ["__radd__", "__rsub__", "__rmul__", "__rtruediv__", "__rdiv__", "__rpow__", "__rmatmul__",
              "__rfloordiv__", "__rmod__", "__rand__", "__ror__", "__rxor__", "__rlshift__", "__rrshift__"]
# operators whose __torch_function__ call already names them (and indexing is too hot to wrap)
_SELF_NAMING = {"__getitem__", "__setitem__", "__bool__", "__nonzero__"}
_REQUIRED_SECTIONS = ("functional", "tensor", "torch", "distributed")
# the fused optimizer steps of torch.optim (fused=True; transformers 5's default AdamW): one call a step for every
# parameter of a group, its tensors in lists (params, grads, moments, steps)
_FUSED_OPTIMIZERS = ("_fused_adamw_", "_fused_adam_", "_fused_sgd_", "_fused_adagrad_")


def load_api_lists(path: str = SUPPORT_YAML) -> dict:
    """{section: [api names]} of the API list; a list that cannot be read is an error, never a
    silently smaller API table."""
    import yaml

    if hasattr(yaml, "CSafeLoader"):  # the C loader is ~20x faster on this 2000-line list
        try:
            with open(path, encoding="utf-8") as handle:
                data = yaml.load(handle, Loader=yaml.CSafeLoader)
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            detail = " ".join(str(exc).split())
            raise ParseError(f"API list '{path}' cannot be loaded ({detail}); reinstall msprobe.") from None
    else:
        data = load_yaml(path, what="API list")
    sections = data if isinstance(data, dict) else {}
    bad = [key for key in _REQUIRED_SECTIONS if not isinstance(sections.get(key), list)
           or not all(isinstance(name, str) for name in sections[key])]
    if bad:
        raise ParseError(f"API list '{path}' lacks the name lists {bad}; reinstall msprobe.")
    return {key: list(value or []) for key, value in sections.items() if isinstance(value, list)}


@functools.lru_cache(maxsize=1)
def _reference_lists():
    return load_api_lists(SUPPORT_YAML)


def _add(table, obj, name):
    if obj is None or not callable(obj) or isinstance(obj, type):
        return
    try:
        table.setdefault(obj, name)
    except TypeError:  # unhashable callables cannot be looked up by identity anyway
        pass
    # one of our own wrappers (seed_all's dropout with p=0): the function it calls, which is what reaches the
    # dump's TorchFunctionMode, and what is back in place after restore_dropout(), gets the name too
    original = getattr(obj, "_msprobe_original", None)
    if original is not None:
        _add(table, original, name)


def _api_entries():
    """(owner, attribute, "Prefix.api") of every API the L1 dump wraps, in the order the names win."""
    import torch.nn.functional as F

    lists = _reference_lists()
    # what dir() finds beyond the list must be torch's own (not typing.Optional re-exported by F)
    found = {n for n in dir(F) if not n.startswith("_") and in_framework(getattr(F, n, None), ("torch",))}
    for name in sorted((set(lists["functional"]) | found) - _NOT_APIS):
        yield F, name, f"Functional.{name}"
    # nn.LSTM calls torch._VF.lstm, the same object as torch.lstm: 1.2.1 names it "VF.lstm"
    for name in lists.get("_VF", []):
        yield torch._VF, name, f"VF.{name}"
    torch_names = set(lists["torch"])
    overridable = torch.overrides.get_overridable_functions().get(torch, [])
    torch_names |= {fn.__name__ for fn in overridable if not fn.__name__.startswith("_")}
    torch_names |= set(optimizer_api_names())
    for name in sorted(torch_names):
        if name.split(".")[-1] in _NOT_APIS or name.startswith("is_"):
            continue
        head, _, attribute = name.rpartition(".")
        owner = dotted_attribute(torch, head) if head else torch  # 'linalg.vector_norm': names of our list
        if owner is not None:
            yield owner, attribute, f"Torch.{name}"
    # a method shared with an operator (Tensor.pow is Tensor.__pow__) keeps the method's name: the
    # operator form is told apart by its wrapper (see operator_names)
    for name in sorted(lists["tensor"], key=lambda n: n.startswith("__")) + _REFLECTED:
        owner = torch.Tensor if getattr(torch.Tensor, name, None) is not None else torch._C.TensorBase
        yield owner, name, f"Tensor.{name}"
    yield from _npu_entries(lists.get("torch_npu", []))


def optimizer_api_names():
    """The private torch functions torch.optim's foreach and fused implementations call: `_foreach_*` (one kernel
    over a list of tensors, e.g. `_foreach_lerp_(exp_avgs, grads, 0.1)`) and the fused steps. Recorded as
    `Torch.<name>`; a list argument's tensors are `input.<position>.<index>`, index = the parameter's place in
    its param group."""
    return tuple(sorted(name for name in dir(torch) if name.startswith("_foreach_") and callable(getattr(torch, name))
                        )) + tuple(name for name in _FUSED_OPTIMIZERS if callable(getattr(torch, name, None)))


def _is_api(obj):
    return obj is not None and callable(obj) and not isinstance(obj, type)


@functools.lru_cache(maxsize=1)
def api_table():
    """{function object: "Prefix.api"} for every API the L1 dump records (the first name added wins)."""
    table = {}
    for owner, attribute, name in _api_entries():
        _add(table, getattr(owner, attribute, None), name)
    return table


@functools.lru_cache(maxsize=1)
def api_allow_list():
    """The APIs names may resolve to (run_ut, op_generate, online run_ut, run_overflow_check): every name
    of the L1 dump's table (all names of an object, so 'Torch.conv2d' too) and the registered ATen
    operators the L2 dump records ('Aten.addmm', 'Aten.addmm.default'), less those whose schema has an
    effect outside tensors (Aten.from_file; see replay_guard). See msprobe.core.api_resolver."""
    tables = {}
    for owner, attribute, name in _api_entries():
        if _is_api(getattr(owner, attribute, None)):
            prefix, _, api = name.partition(".")
            tables.setdefault(prefix, {}).setdefault(api, (owner, attribute))
    tables["Aten"] = operator_table("aten")
    from msprobe.pytorch.api_accuracy_checker.replay_guard import effect_refusal

    return ApiAllowList("pytorch", tables, version=torch.__version__, refusal=effect_refusal)


@functools.lru_cache(maxsize=None)
def operator_table(namespace=None):
    """Mapping 'addmm' / 'addmm.default' / 'add.Tensor' -> (owner, attribute) of the registered operator of
    `namespace`; with no namespace, every registered operator by 'namespace.packet.overload'
    ('_c10d_functional.all_reduce.default')."""
    return _OperatorTable(namespace)


class _OperatorTable(Mapping):
    """The dispatcher's registered operators, looked up only by their registered names (never by walking
    torch.ops: its attributes include import_module and load_library)."""

    def __init__(self, namespace):
        self.namespace = namespace
        self._names = None

    def _registered(self, refresh=False):
        if self._names is None or refresh:  # libraries loaded later register more operators
            names = {}
            for qualified in torch._C._dispatch_get_all_op_names():
                namespace, _, rest = qualified.partition("::")
                if self.namespace is not None and namespace != self.namespace:
                    continue
                packet, _, overload = rest.partition(".")
                head = "" if self.namespace is not None else f"{namespace}."
                names[f"{head}{packet}"] = (namespace, packet, "")
                names[f"{head}{packet}.{overload or 'default'}"] = (namespace, packet, overload or "default")
            self._names = names
        return self._names

    def __getitem__(self, api):
        parts = self._registered().get(api) or self._registered(refresh=True).get(api)
        if parts is None:
            raise KeyError(api)
        namespace, packet_name, overload = parts
        owner = getattr(torch.ops, namespace)  # a registered namespace and packet: torch.ops makes them
        return (getattr(owner, packet_name), overload) if overload else (owner, packet_name)

    def __iter__(self):
        return iter(sorted(self._registered()))

    def __len__(self):
        return len(self._registered())


@functools.lru_cache(maxsize=1)
def operator_names():
    """Tensor operators recorded under their own name (`a * b` -> "Tensor.__mul__", as 1.2.1 writes it).

    `a * b` reaches __torch_function__ as Tensor.mul, exactly like `a.mul(b)`: only a wrapper around
    Tensor.__mul__ can tell them apart, so these are wrapped while an API-level dump runs."""
    names = [n for n in _reference_lists()["tensor"] if n.startswith("__") and n.endswith("__")]
    names += [n for n in _REFLECTED if n not in names]
    return tuple(n for n in names if n not in _SELF_NAMING and hasattr(torch.Tensor, n))


def _npu_entries(names):
    try:
        import torch_npu  # noqa: F401  (only present on Ascend machines)
    except ImportError:
        return
    for name in names:
        yield torch_npu, name, f"NPU.{name}"


def distributed_api_names():
    """Collectives recorded as "Distributed.<name>" (they bypass __torch_function__)."""
    return list(_reference_lists()["distributed"])
