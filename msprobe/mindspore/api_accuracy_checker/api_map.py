"""Which MindSpore APIs run_ut checks, their callables, and the PyTorch op used as the bench.

Both callables come from allow-lists of the APIs the dumps wrap (msprobe.core.api_resolver), never from
walking the name's dots."""
from msprobe.core.api_resolver import ApiNameRefused, resolve, shown_name
from msprobe.core.errors import UnsupportedError
from msprobe.core.naming import is_random_api

__all__ = ["SUPPORTED_TENSOR_APIS", "SUPPORTED_PRIMITIVES", "resolve_mindspore", "resolve_torch", "ms_dtype",
           "torch_dtype_of"]

# Tensor methods with a well-defined benchmark (msprobe 1.2.1 checker_support_api.yaml)
SUPPORTED_TENSOR_APIS = frozenset((
    "add_ add addmm_ all allclose any bool byte ceil clamp contiguous copy_ cos clone cumprod expand_as flatten "
    "float half int is_contiguous isnan item log log2 long masked_fill max mean min numel numpy repeat "
    "repeat_interleave reshape round select sin size split sqrt square sub swapaxes to t tolist topk transpose "
    "trunc type unsqueeze view view_as fill_ floor_ clamp_ type_as zero_ __add__ __sub__ __mul__ __truediv__ "
    "__matmul__ __neg__ __pow__ __radd__ __rsub__ __rmul__").split())
# primitives held by cells ("Primitive.{attr}.{Class}", e.g. mint.nn.Linear's dense), by class: the
# primitive takes no constructor arguments, so a new instance computes what the recorded one did;
# the value is the PyTorch bench, a (prefix, api) of PyTorch's allow-list
SUPPORTED_PRIMITIVES = {"Dense": ("Functional", "linear")}


def _primitive_class(api):
    """'dense.Dense' -> 'Dense' when it is a supported primitive, else None."""
    name = api.rsplit(".", 1)[-1]
    return name if name in SUPPORTED_PRIMITIVES else None


def _new_primitive(api):
    from mindspore.ops.auto_generate import gen_ops_prim

    cls = getattr(gen_ops_prim, _primitive_class(api) or "", None)
    if cls is None:
        raise UnsupportedError(f"Primitive.{shown_name(api)} is not a primitive run_ut supports "
                               f"({', '.join(sorted(SUPPORTED_PRIMITIVES))})")
    return cls()


def _torch_transpose(tensor, *axes):
    """MindSpore's Tensor.transpose: two dims swap them, a permutation (or none: reversed) permutes."""
    if len(axes) == 2 and all(isinstance(a, int) for a in axes):
        return tensor.transpose(*axes)
    if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
        axes = tuple(axes[0])
    return tensor.permute(*(axes or reversed(range(tensor.dim()))))


# torch benches whose argument conventions differ from the MindSpore API of the same name
_TORCH_ADAPTERS = {("Tensor", "transpose"): _torch_transpose}


def resolve_mindspore(prefix, api):
    """The MindSpore callable of Mint / MintFunctional / supported Tensor APIs, only from the allow-list of
    the APIs the dump wraps (msprobe.core.api_resolver); UnsupportedError otherwise."""
    if is_random_api(api):
        raise UnsupportedError("random or uninitialised output: two runs cannot be compared")
    if prefix == "Primitive":
        return _new_primitive(api)
    if prefix not in ("Mint", "MintFunctional", "Tensor"):
        raise UnsupportedError(f"'{shown_name(prefix)}' APIs are not checked: MindSpore run_ut covers mint, "
                               "mint.nn.functional, the supported Tensor APIs and primitives")
    if prefix == "Tensor" and api not in SUPPORTED_TENSOR_APIS:
        raise UnsupportedError(f"Tensor.{shown_name(api)} is not in the list of Tensor APIs run_ut supports")
    from msprobe.mindspore.dump.api_registry import api_allow_list

    return resolve(api_allow_list(), prefix, api)


# the PyTorch names a MindSpore API may have: mint.special.log1p is torch.log1p, mint.X may live in torch.linalg
def _torch_candidates(prefix, api):
    if prefix == "MintFunctional":
        return [("Functional", api)]
    if prefix == "Tensor":
        return [("Tensor", api)]
    if prefix != "Mint":
        return []
    if api.startswith("special."):
        return [("Torch", api), ("Torch", api[len("special."):])]
    return [("Torch", api), ("Torch", f"linalg.{api}")]


def resolve_torch(prefix, api):
    """The equivalent PyTorch callable from PyTorch's allow-list, or None when torch is missing or has no
    such API."""
    from msprobe.core.framework import get_framework

    try:  # the bench side's API list, through the seam (MindSpore's adapter does not import PyTorch's)
        torch_allow_list = get_framework("pytorch").api_allow_list()
    except ImportError:
        return None
    if (prefix, api) in _TORCH_ADAPTERS:
        return _TORCH_ADAPTERS[(prefix, api)]
    candidates = _torch_candidates(prefix, api)
    if prefix == "Primitive":
        name = _primitive_class(api)
        candidates = [SUPPORTED_PRIMITIVES[name]] if name else []
    for torch_prefix, torch_api in candidates:
        try:
            return resolve(torch_allow_list, torch_prefix, torch_api, warn=False)
        except ApiNameRefused:
            continue
    return None


def ms_dtype(name):
    """'Float32' / 'bfloat16' / 'Bool' -> mindspore dtype."""
    import mindspore as ms

    short = str(name).rsplit(".", 1)[-1].lower()
    value = getattr(ms, "bool_" if short == "bool" else short, None)
    if not isinstance(value, ms.common.dtype.Type):  # a name of anything else (mindspore.log) is refused
        raise UnsupportedError(f"unknown MindSpore dtype {str(name)[:80]!r}")
    return value


def torch_dtype_of(name):
    import torch

    short = str(name).rsplit(".", 1)[-1].lower().rstrip("_")
    value = getattr(torch, short, None)
    if not isinstance(value, torch.dtype):
        raise UnsupportedError(f"dtype {name!r} has no PyTorch equivalent")
    return value
