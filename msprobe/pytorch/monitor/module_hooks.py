"""Activation monitoring: forward hooks for module inputs/outputs and tensor hooks for their gradients.

Gradients are taken with `Tensor.register_hook` on the module's output (output_grad) and input
(input_grad: the gradient of that input tensor, summed over all its consumers), which changes neither
the autograd graph nor any value, unlike full backward hooks. Records are named `{module}_{k}` where k
counts the module's calls in the step (micro-batches with gradient accumulation); the root module is
`root`.
"""
import torch

from msprobe.core.monitor.module_struct import describe_io
from msprobe.core.monitor.monitor_config import parse_target_spec
from msprobe.core.monitor.names import select_targets, squash_name

__all__ = ["ActivationHooks", "squash_name", "select_targets"]


def _pick(value, index):
    if isinstance(value, torch.Tensor):
        return value if index == 0 else None
    if isinstance(value, (tuple, list)) and len(value) > index and isinstance(value[index], torch.Tensor):
        return value[index]
    return None


def _is_tensor(value) -> bool:
    return isinstance(value, torch.Tensor)


class ActivationHooks:
    """Installs the hooks through a HookSession; `collecting()` tells whether this step is collected."""

    def __init__(self, monitor, session, modules: list, forward: bool, backward: bool):
        self.monitor = monitor
        self.forward = forward
        self.backward = backward
        self.calls = {}
        self.struct = {} if monitor.config.print_struct else None
        for vpp, name, module, spec in modules:
            session.add_handle(module.register_forward_hook(self._make_hook(vpp, name, spec)))

    def new_step(self):
        self.calls.clear()

    def _make_hook(self, vpp, name, spec):
        indices = {io: parse_target_spec(io, text) for io, text in spec.items()}

        def hook(module, args, output):
            monitor = self.monitor
            if self.struct is not None:
                self.struct[f"{vpp}:{name}"] = {"input": describe_io(args, _is_tensor),
                                                "output": describe_io(output, _is_tensor)}
            if not monitor.collecting_now:
                return None
            key = (vpp, name)
            call = self.calls.get(key, 0)
            self.calls[key] = call + 1
            record_name = f"{name}_{call}"
            batch = monitor.batch
            with torch.no_grad():
                x = _pick(args, indices.get("input", 0))
                y = _pick(output, indices.get("output", 0))
                if self.forward:
                    if x is not None:
                        batch.add(x, "actv", record_name, io="input", vpp_stage=vpp, micro_step=call)
                    if y is not None:
                        batch.add(y, "actv", record_name, io="output", vpp_stage=vpp, micro_step=call)
            if self.backward and torch.is_grad_enabled():
                for tensor, io in ((y, "output_grad"), (x, "input_grad")):
                    if tensor is not None and tensor.requires_grad:
                        tensor.register_hook(self._grad_hook(record_name, io, vpp, call))
            return None

        return hook

    def _grad_hook(self, record_name, io, vpp, call):
        def on_grad(grad):
            if self.monitor.collecting_now and grad is not None:
                with torch.no_grad():
                    self.monitor.batch.add(grad, "actv_grad", record_name, io=io, vpp_stage=vpp, micro_step=call)
            return None
        return on_grad
