"""Cell hooks of the MindSpore monitor: forward activations (`actv`), their gradients (`actv_grad`) and print_struct.

Forward: `Cell.register_forward_hook` reads the selected input and output of each hooked cell. Backward:
nothing is inserted into the autograd graph (`Cell.register_backward_hook` puts a CellBackwardHook node in
front of the cell, which changes the order MindSpore sums gradients in and so the training's bits; see
dump/grad_capture.py). A tensor hook on the selected output, set when the forward returns, reads the
gradient flowing into the cell (`output_grad`); one on the selected input, set before the forward runs,
reads the input's gradient as the training sums it (`input_grad`: the cell's own when the cell is the
input's only consumer, as in a chain of layers; the total over every consumer otherwise). Tested bitwise
on a model whose inputs feed several consumers. Records are named `{cell}_{k}` where k counts the cell's
forward calls in the step (a backward record carries the number of the forward call it belongs to); the
root cell is `root`. A missing gradient (the input of the first layer
needs none) is `nan` in the csv, as in PyTorch.
"""
from mindspore import Tensor

from msprobe.core.monitor.module_struct import describe_io
from msprobe.mindspore.dump.grad_capture import grad_enabled, is_float_tensor
from msprobe.core.monitor.monitor_config import parse_target_spec

__all__ = ["CellHooks"]


def _is_tensor(value) -> bool:
    return isinstance(value, Tensor)


def _pick(value, index):
    if isinstance(value, Tensor):
        return value if index == 0 else None
    if isinstance(value, (tuple, list)) and len(value) > index and isinstance(value[index], Tensor):
        return value[index]
    return None


class CellHooks:
    """Installs the hooks of `cells` [(label, cell, target spec)] through `session`."""

    def __init__(self, monitor, session, cells: list, forward: bool, backward: bool):
        self.monitor = monitor
        self.forward = forward
        self.calls = {}
        self.grad_calls = {}  # label -> forward calls whose gradients are watched this step
        self.struct = {} if monitor.config.print_struct else None
        for label, cell, spec in cells:
            indices = {io: parse_target_spec(io, text) for io, text in spec.items()}
            if forward or self.struct is not None:
                session.add_handle(cell.register_forward_hook(self._forward_hook(label, indices)))
            if backward:
                pre, post = self._gradient_hooks(label, indices)
                session.add_handle(cell.register_forward_pre_hook(pre))
                session.add_handle(cell.register_forward_hook(post))

    def new_step(self) -> None:
        self.calls.clear()
        self.grad_calls.clear()

    def _forward_hook(self, label, indices):
        def hook(_cell, inputs, output):
            if self.struct is not None:
                self.struct[f"0:{label}"] = {"input": describe_io(inputs, _is_tensor),
                                             "output": describe_io(output, _is_tensor)}
            if not (self.forward and self.monitor.collecting_now):
                return None
            call = self.calls.get(label, 0)
            self.calls[label] = call + 1
            x, y = _pick(inputs, indices.get("input", 0)), _pick(output, indices.get("output", 0))
            for tensor, io in ((x, "input"), (y, "output")):
                if tensor is not None:
                    self.monitor.batch.add(tensor, "actv", f"{label}_{call}", io=io, micro_step=call)
            return None
        return hook

    def _gradient_hooks(self, label, indices):
        """(pre, post) forward hooks that put tensor hooks on the selected input and output of each call
        made while collecting under a gradient transform; the k-th call's gradients are `{label}_{k}`."""
        input_index = indices.get("input_grad", indices.get("input", 0))
        output_index = indices.get("output_grad", indices.get("output", 0))
        open_calls = []  # call numbers of forwards that have started and not returned (nested reuse)

        def pre(_cell, inputs):
            if not (self.monitor.collecting_now and grad_enabled()):
                return None
            call = self.grad_calls.get(label, 0)
            self.grad_calls[label] = call + 1
            open_calls.append(call)
            self._watch(_pick(inputs, input_index), label, call, "input_grad")
            return None

        def post(_cell, _inputs, output):
            if open_calls:
                self._watch(_pick(output, output_index), label, open_calls.pop(), "output_grad")
            return None
        return pre, post

    def _watch(self, tensor, label, call, io):
        if not is_float_tensor(tensor, Tensor):
            return

        def hook(grad):
            if self.monitor.collecting_now:
                self.monitor.batch.add(grad, "actv_grad", f"{label}_{call}", io=io, micro_step=call)
            return None
        tensor.register_hook(hook)
