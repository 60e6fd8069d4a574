"""Which MindSpore APIs L1 dump wraps, and the patching that installs and removes the wrappers.

mint, mint.nn.functional, mint.linalg, mint.special and mint.distributed are discovered from the
installed MindSpore (every public function); mindspore.ops, mindspore.Tensor methods and
communication.comm_func come from wrapped_apis.yaml, keeping only names the installed version has.
`ApiPatcher(on_call).install()` replaces each API by a thin wrapper that calls
`on_call(prefix, api, original, args, kwargs)`; `remove()` puts back exactly what was there (an
attribute a class only inherited is deleted again, not shadowed; a staticmethod stays one).
"""
import functools
import inspect
import os

from msprobe.core.api_resolver import ApiAllowList, in_framework
from msprobe.core.log import logger
from msprobe.core.paths import load_yaml

__all__ = ["ApiPatcher", "api_targets", "api_allow_list", "PREFIXES"]

_LIST_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "wrapped_apis.yaml")

#: dump-name prefix of each wrapped namespace (06.data_dump_MindSpore.md, "npy文件名的前缀含义")
PREFIXES = {"mint": "Mint", "mint.nn.functional": "MintFunctional", "ops": "Functional",
            "Tensor": "Tensor", "communication.comm_func": "Distributed", "mint.distributed": "Distributed"}
#: mint sub-namespaces named inside the API, like torch.linalg in PyTorch dumps: "Mint.linalg.vector_norm"
MINT_SUBMODULES = ("linalg", "special")

# Tensor methods our own hooks and statistics use, or that Python calls implicitly
# (truth tests, printing, indexing by the framework); wrapping them would record noise or recurse.
_TENSOR_SKIP = {"__bool__", "__len__", "__iter__", "__format__", "__index__", "__int__", "__float__",
                "__repr__", "__str__", "__hash__", "__array__", "__getstate__", "__setstate__",
                "__reduce__", "__reduce_ex__", "__deepcopy__", "__init__", "__new__", "__setattr__",
                "__getattribute__", "asnumpy", "astype", "register_hook", "numpy", "item", "tolist",
                "dtype", "shape", "size", "ndim", "data", "init_data", "is_contiguous", "contiguous"}
# names in mint that are helpers (decorators, import flags), not numerical APIs
_MINT_SKIP = {"absolute_import", "constexpr", "jit_forbidden_register", "jit_view_unsupported"}
# mint.distributed functions that move no tensor data (process groups, queries, object pickling)
_DISTRIBUTED_SKIP_PARTS = ("get_", "is_", "init_", "destroy_", "new_group", "object")


def _public_functions(module):
    names = []
    for name in dir(module):
        if name.startswith("_") or name in _MINT_SKIP:
            continue
        value = getattr(module, name, None)
        # a re-export from outside MindSpore (a typing or numpy helper) is not a MindSpore API
        if callable(value) and not inspect.isclass(value) and not inspect.ismodule(value) \
                and in_framework(value, ("mindspore",)):
            names.append(name)
    return names


def _mint_distributed_functions(mint):
    distributed = getattr(mint, "distributed", None)
    if distributed is None:
        return None, []
    return distributed, [n for n in _public_functions(distributed)
                         if not any(part in n for part in _DISTRIBUTED_SKIP_PARTS) and n != "barrier"]


def api_targets():
    """[(owner object, attribute name, prefix, api name)] of every API to wrap, in a fixed order
    (each attribute once)."""
    import mindspore
    from mindspore import mint, ops

    listed = load_yaml(_LIST_FILE, what="wrapped API list") or {}
    targets, seen = [], set()

    def add(owner, name, prefix, api):
        if (id(owner), name) not in seen:
            seen.add((id(owner), name))
            targets.append((owner, name, prefix, api))

    for name in _public_functions(mint):
        add(mint, name, PREFIXES["mint"], name)
    for name in _public_functions(mint.nn.functional):
        add(mint.nn.functional, name, PREFIXES["mint.nn.functional"], name)
    for sub in MINT_SUBMODULES:
        module = getattr(mint, sub, None)
        for name in _public_functions(module) if module is not None else ():
            add(module, name, PREFIXES["mint"], f"{sub}.{name}")
    for name in listed.get("ops", []):
        if callable(getattr(ops, name, None)) and not inspect.isclass(getattr(ops, name)):
            add(ops, name, PREFIXES["ops"], name)
    for name in listed.get("tensor", []):
        if name not in _TENSOR_SKIP and callable(getattr(mindspore.Tensor, name, None)):
            add(mindspore.Tensor, name, PREFIXES["Tensor"], name)
    try:
        from mindspore.communication import comm_func
    except ImportError:  # builds without distributed support
        comm_func = None
    if comm_func is not None:
        for name in listed.get("communication.comm_func", []):
            if callable(getattr(comm_func, name, None)):
                add(comm_func, name, PREFIXES["communication.comm_func"], name)
    distributed, names = _mint_distributed_functions(mint)
    for name in names:
        add(distributed, name, PREFIXES["mint.distributed"], name)
    return targets


@functools.lru_cache(maxsize=1)
def api_allow_list():
    """The APIs names may resolve to (run_ut, multi_run_ut): exactly the ones `api_targets` wraps, by dump
    name ('Mint.special.log1p', 'Tensor.__mul__'), less those with a file, path or handle parameter
    (replay_guard.signature_refusal). See msprobe.core.api_resolver."""
    import mindspore

    tables = {}
    for owner, name, prefix, api in api_targets():
        tables.setdefault(prefix, {}).setdefault(api, (owner, name))
    from msprobe.mindspore.api_accuracy_checker.replay_guard import signature_refusal

    return ApiAllowList("mindspore", tables, version=mindspore.__version__, refusal=signature_refusal)


def _make_wrapper(original, prefix, api, on_call):
    def wrapper(*args, **kwargs):
        return on_call(prefix, api, original, args, kwargs)
    try:
        functools.update_wrapper(wrapper, original)
    except (AttributeError, TypeError):  # builtins without __dict__
        wrapper.__name__ = api
    wrapper.__msprobe_original__ = original
    return wrapper


_MISSING = object()


class ApiPatcher:
    """Installs and removes the L1 wrappers of one `on_call`; idempotent in both directions.

    Wrappers are built once and kept while detached: installing them again (every start()) is one
    setattr per API. A wrapper is rebuilt only when the attribute it wraps was replaced meanwhile."""

    def __init__(self, on_call):
        self.on_call = on_call
        self._saved = []     # (owner, name, what owner.__dict__ held: a staticmethod stays one, or _MISSING)
        self._targets = None
        self._wrappers = {}  # (id(owner), name) -> (the original it wraps, the value installed)

    @property
    def installed(self):
        return bool(self._saved)

    def api_count(self):
        return len(self._targets or ())

    def install(self):
        """Wrap every API; if one setattr fails unexpectedly the ones made so far are undone."""
        if self._saved:
            return
        if self._targets is None:
            self._targets = api_targets()
        try:
            for owner, name, prefix, api in self._targets:
                self._install_one(owner, name, prefix, api)
        except BaseException:
            self.remove()
            raise

    def _install_one(self, owner, name, prefix, api):
        raw = vars(owner).get(name, _MISSING)
        original = getattr(owner, name)
        cached = self._wrappers.get((id(owner), name))
        if cached is None or cached[0] is not original:
            wrapper = _make_wrapper(original, prefix, api, self.on_call)
            # `original` is already bound (classmethod) or plain (staticmethod): no self to add
            value = staticmethod(wrapper) if isinstance(raw, (staticmethod, classmethod)) else wrapper
            cached = self._wrappers[(id(owner), name)] = (original, value)
        try:
            setattr(owner, name, cached[1])
        except (AttributeError, TypeError) as exc:
            logger.debug(f"msprobe: cannot wrap {prefix}.{api}: {exc}")
            return
        self._saved.append((owner, name, raw))

    def remove(self):
        """Put back exactly what each owner held (an inherited attribute is deleted again)."""
        for owner, name, raw in reversed(self._saved):
            if raw is _MISSING:
                delattr(owner, name)
            else:
                setattr(owner, name, raw)
        self._saved = []
