"""Optimizer states of the monitored parameters, for any torch optimizer (`opt_ty=None`) and known wrappers.

The states are read from `optimizer.state[param]` right before the step (the values the step starts from):
every tensor entry shaped like the parameter becomes a kind named after its key — Adam / AdamW / NAdam /
RAdam `exp_avg` and `exp_avg_sq`, Adamax `exp_avg` and `exp_inf`, SGD `momentum_buffer`, RMSprop
`square_avg`, Adagrad `sum`, ... Adam-style moments come with their bias-correction factor so that the
anomaly rule judges m / (1 - b1^t) and v / (1 - b2^t) rather than moments that grow by construction.
Megatron's mixed-precision wrappers keep the states on fp32 master copies: `float16_groups` is mapped to
`fp32_from_float16_groups` when the wrapper has them.
"""
import torch

from msprobe.pytorch.monitor.optimizer_watch import unwrap_optimizer

__all__ = ["master_params", "state_tensors", "OPT_TYPES"]

OPT_TYPES = (None, "Megatron_DistributedOptimizer", "Megatron_Float16OptimizerWithFloat16Params",
             "Megatron_ChainedDistributedOptimizer", "Megatron_ChainedFloat16OptimizerWithFloat16Params",
             "Megatron_FP32Optimizer", "DeepSpeedZeroOptimizer_Stage0", "DeepSpeedZeroOptimizer_Stage1_or_2",
             "DeepSpeedZeroOptimizer_Stage3", "unknown")
_BETA_INDEX = {"exp_avg": 0, "exp_avg_sq": 1}


def master_params(wrapper) -> dict:
    """id(model param) -> the parameter the optimizer keeps state for (itself unless a wrapper maps it)."""
    mapping = {}
    model_groups = getattr(wrapper, "float16_groups", None)
    master_groups = getattr(wrapper, "fp32_from_float16_groups", None)
    if model_groups is not None and master_groups is not None:
        for model_group, master_group in zip(model_groups, master_groups):
            for model_param, master_param in zip(model_group, master_group):
                mapping[id(model_param)] = master_param
    return mapping


def _step_count(state) -> float:
    step = state.get("step")
    if isinstance(step, torch.Tensor):
        return float(step.item()) if step.numel() == 1 else 0.0
    return float(step or 0)


def state_tensors(optimizer, named_params, wrapper=None):
    """[(key, name, tensor, bias_correction_scale or None)] for the parameters' optimizer states.

    A scale of None means the state has no known warm-up correction (only the non-finite rule judges it).
    """
    inner = unwrap_optimizer(optimizer)
    mapping = master_params(wrapper) if wrapper is not None else {}
    groups = {}
    for group in inner.param_groups:
        for param in group["params"]:
            groups[id(param)] = group
    out = []
    for name, param in named_params:
        target = mapping.get(id(param), param)
        state = inner.state.get(target)
        if not state:
            continue
        group = groups.get(id(target), {})
        betas = group.get("betas")
        steps = _step_count(state)
        for key, value in state.items():
            if not isinstance(value, torch.Tensor) or value.shape != target.shape or key == "step":
                continue
            scale = None
            if key in _BETA_INDEX and betas is not None and steps > 0:
                beta = float(betas[_BETA_INDEX[key]])
                scale = 1.0 / (1.0 - beta ** steps) if beta < 1.0 else 1.0
            out.append((key, name, value, scale))
    return out
