"""Find the PyTorch callable behind a dump name prefix + API, or say why it cannot be checked."""
import torch

from msprobe.core.errors import UnsupportedError
from msprobe.core.naming import dotted_attribute

__all__ = ["resolve_api", "is_inplace", "RANDOM_APIS"]

# their outputs are random or uninitialised, so two runs cannot be compared
RANDOM_APIS = frozenset((
    "dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout", "rrelu",
    "rrelu_", "native_dropout", "rand", "rand_like", "randn", "randn_like", "randint", "randint_like",
    "randperm", "normal", "normal_", "bernoulli", "bernoulli_", "multinomial", "uniform_", "exponential_",
    "geometric_", "log_normal_", "cauchy_", "random_", "empty", "empty_like", "new_empty",
    "new_empty_strided", "empty_strided", "gumbel_softmax", "fractional_max_pool2d", "fractional_max_pool3d",
))
_INPLACE_DUNDERS = frozenset(("__iadd__", "__isub__", "__imul__", "__idiv__", "__itruediv__", "__ifloordiv__",
                              "__imod__", "__ipow__", "__iand__", "__ior__", "__ixor__", "__ilshift__",
                              "__irshift__", "__imatmul__", "__setitem__"))


def is_inplace(api):
    """Whether the API writes into its first argument (add_, __iadd__, __setitem__)."""
    return api in _INPLACE_DUNDERS or (api.endswith("_") and not api.endswith("__"))


def resolve_api(prefix, api):
    """The callable for ('Functional', 'linear'), ('Torch', 'matmul'), ('Tensor', 'add_'), ('Aten', 'mm')."""
    if prefix == "Distributed":
        raise UnsupportedError("communication API: needs a process group, not checked by run_ut")
    if prefix in ("NPU", "npu"):
        raise UnsupportedError("NPU fused operator: no kernel in this environment (torch_npu missing)")
    if api in RANDOM_APIS:
        raise UnsupportedError("random or uninitialised output: two runs cannot be compared")
    roots = {
        "Functional": (torch.nn.functional,),
        "Torch": (torch, torch.special, torch.linalg, torch.fft),
        "Tensor": (torch.Tensor,),
        "Aten": (torch.ops.aten,),
        "VF": (torch._VF,),
    }.get(prefix)
    if roots is None:
        raise UnsupportedError(f"API type '{prefix}' is not supported by run_ut")
    for root in roots:
        function = dotted_attribute(root, api)
        if callable(function):
            return function
    raise UnsupportedError(f"{prefix}.{api} does not exist in torch {torch.__version__}")
