"""Find the PyTorch callable behind a dump name prefix + API, or say why it cannot be checked."""
import torch

from msprobe.core.errors import UnsupportedError
from msprobe.core.naming import RANDOM_APIS, dotted_attribute, is_inplace, is_random_api

__all__ = ["resolve_api", "is_inplace", "RANDOM_APIS"]  # the rules live in core.naming

def resolve_api(prefix, api):
    """The callable for ('Functional', 'linear'), ('Torch', 'matmul'), ('Tensor', 'add_'), ('Aten', 'mm')."""
    if prefix == "Distributed":
        raise UnsupportedError("communication API: needs a process group, not checked by run_ut")
    if prefix in ("NPU", "npu"):
        raise UnsupportedError("NPU fused operator: no kernel in this environment (torch_npu missing)")
    if is_random_api(api):
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
