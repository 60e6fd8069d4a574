"""Cell hooks of the MindSpore monitor: forward activations (`actv`), their gradients (`actv_grad`) and print_struct.

Forward: `Cell.register_forward_hook` reads the selected input and output of each hooked cell. Backward:
`Cell.register_backward_hook` receives the gradients with respect to the cell's inputs (`input_grad`) and
outputs (`output_grad`); it only reads them, so the gradients and the training are unchanged (tested
bitwise). Records are named `{cell}_{k}` where k counts the cell's forward calls in the step (forward and
backward are counted apart: the k-th backward of a cell belongs to its k-th forward when each micro-batch
runs forward then backward); the root cell is `root`. A missing gradient (the input of the first layer
needs none) is `nan` in the csv, as in PyTorch.
"""
from mindspore import Tensor

from msprobe.core.monitor.module_struct import describe_io
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
        self.grad_calls = {}
        self.struct = {} if monitor.config.print_struct else None
        for label, cell, spec in cells:
            indices = {io: parse_target_spec(io, text) for io, text in spec.items()}
            if forward or self.struct is not None:
                session.add_handle(cell.register_forward_hook(self._forward_hook(label, indices)))
            if backward:
                session.add_handle(cell.register_backward_hook(self._backward_hook(label, indices)))

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

    def _backward_hook(self, label, indices):
        input_index = indices.get("input_grad", indices.get("input", 0))
        output_index = indices.get("output_grad", indices.get("output", 0))

        def hook(_cell, grad_input, grad_output):
            if not self.monitor.collecting_now:
                return None
            call = self.grad_calls.get(label, 0)
            self.grad_calls[label] = call + 1
            dx, dy = _pick(grad_input, input_index), _pick(grad_output, output_index)
            for tensor, io in ((dy, "output_grad"), (dx, "input_grad")):
                if tensor is not None:
                    self.monitor.batch.add(tensor, "actv_grad", f"{label}_{call}", io=io, micro_step=call)
            return None
        return hook
