"""Which ATen ops online_dispatch does not re-run: the documented skip list plus rules read from the schema.

Documented list (1.2.1's torch_ops_config.yaml, `aten_ops_blacklist`): views, copies, factories and a few
ops whose CPU and device results legitimately differ. The schema rules add every op that
- returns a view of an input (nothing is computed),
- draws random numbers (re-running it would advance the CPU generator and change the training run),
- has no tensor input (a factory: nothing to compare it with).
"""
from typing import Optional

import torch

__all__ = ["DOCUMENTED_SKIP_LIST", "RANDOM", "skip_reason", "draws_random_numbers"]

RANDOM = "random"

DOCUMENTED_SKIP_LIST = frozenset((
    "max_pool2d_with_indices", "detach", "allreduce_", "max", "npu_rotary_mul", "split_with_sizes",
    "npu_dtype_cast", "add_", "_cudnn_rnn", "_local_scalar_dense", "_pin_memory", "_to_copy", "_unsafe_view",
    "clone", "contiguous", "copy_", "cudnn_batch_norm", "cudnn_batch_norm_backward", "empty", "index_put_",
    "lift_fresh", "max_pool2d_with_indices_backward", "native_batch_norm_backward", "new_empty",
    "new_empty_strided", "new_full", "new_ones", "new_zeros", "ones", "ones_like", "permute", "rand",
    "rand_like", "randint", "randint_like", "randn", "randn_like", "randperm", "scalar_tensor", "select", "to",
    "transpose", "unbind", "view", "zero", "zero_", "zeros", "zeros_like",
))
# uninitialised memory and pure data movement: nothing to check (not in the 1.2.1 list)
_EXTRA_SKIPS = frozenset(("empty_like", "empty_strided", "lift", "alias", "set_", "resize_", "fill_"))


def _returns_view(func: torch._ops.OpOverload) -> bool:
    return any(ret.alias_info is not None and not ret.alias_info.is_write for ret in func._schema.returns)


def skip_reason(func: torch._ops.OpOverload, has_tensor_input: bool) -> Optional[str]:
    """Why `func` is not checked, or None when it is."""
    name = func._overloadpacket.__name__
    if name in DOCUMENTED_SKIP_LIST or name in _EXTRA_SKIPS:
        return "skip list"
    if torch.Tag.nondeterministic_seeded in func.tags:
        return RANDOM
    if _returns_view(func):
        return "view"
    if not has_tensor_input:
        return "factory"
    return None


def draws_random_numbers(func: torch._ops.OpOverload, args: tuple, kwargs: dict) -> bool:
    """False for a seeded op called with `dropout_p=0` (attention without dropout draws nothing)."""
    for position, argument in enumerate(func._schema.arguments):
        if argument.name == "dropout_p":
            if argument.name in kwargs:
                value = kwargs[argument.name]
            elif position < len(args):
                value = args[position]
            else:
                value = argument.default_value
            return value != 0
    return True
