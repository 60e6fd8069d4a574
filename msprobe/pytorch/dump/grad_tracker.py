"""Backward data of an API or module call: grads w.r.t. its outputs and w.r.t. each tensor input.

Grads w.r.t. outputs come from `Tensor.register_hook` on the outputs. Grads w.r.t. inputs come
from a plain alias `x.view_as(x)` passed to the call instead of `x`, with a hook on the alias:
the alias has exactly one consumer (this call), so its grad is this call's grad for `x`. No custom
autograd Function is involved, so later in-place ops on views of the outputs keep working, and
the values flowing through autograd are unchanged (a view's backward is the identity).

Rules: `self` of an in-place call and `out=` tensors are never aliased; the same tensor passed
twice gets one alias (code such as multi-head attention checks `query is key`); an alias the call
returns unchanged is swapped back for the original tensor. The backward entry is emitted when the
last input grad arrived (or the last output grad when no input needs one); entries still
incomplete at the end of the step are emitted by `flush()` with null where nothing arrived.
"""
import torch

__all__ = ["GradTracker"]


def _wants_grad(value):
    return (isinstance(value, torch.Tensor) and value.requires_grad and value.layout == torch.strided
            and (value.is_floating_point() or value.is_complex()))


class _PendingBackward:
    __slots__ = ("call", "args_layout", "kw_layout", "input_grads", "output_grads", "out_count",
                 "inputs_left", "outputs_left", "done")

    def __init__(self, call):
        self.call = call
        self.args_layout = []    # per positional arg: None | slot | [slot|None, ...]
        self.kw_layout = []      # slots of tensor kwargs, in order
        self.input_grads = {}
        self.output_grads = {}
        self.out_count = 0
        self.inputs_left = set()
        self.outputs_left = set()
        self.done = False


class GradTracker:
    """Aliases inputs and hooks outputs of dumped calls; reports backward events to the collector.

    pause: a callable returning a context manager that keeps our own tensor ops out of the dump.
    """

    def __init__(self, collector, pause):
        self.collector = collector
        self.pause = pause
        self.handles = []
        self.pending = []

    # -- forward side -----------------------------------------------------------------------
    def alias_inputs(self, call, args, kwargs, inplace):
        """Return (args, kwargs, pending, {id(alias): original}) with grad-requiring tensor inputs
        replaced by aliases."""
        pending = _PendingBackward(call)
        aliases = {}
        originals = []

        def alias_of(tensor, slot):
            alias = aliases.get(id(tensor))
            if alias is None:
                alias = tensor.view_as(tensor)
                aliases[id(tensor)] = alias
                originals.append((tensor, alias))
                self._hook_input(alias, pending, id(tensor))
            pending.inputs_left.add(id(tensor))
            return alias, id(tensor)

        new_args = list(args)
        for i, arg in enumerate(args):
            if _wants_grad(arg) and not (inplace and i == 0):
                new_args[i], slot = alias_of(arg, i)
                pending.args_layout.append(slot)
            elif isinstance(arg, (list, tuple)) and type(arg) in (list, tuple) and any(map(_wants_grad, arg)):
                items, slots = [], []
                for item in arg:
                    if _wants_grad(item):
                        alias, slot = alias_of(item, None)
                        items.append(alias)
                        slots.append(slot)
                    else:
                        items.append(item)
                        slots.append(None)
                new_args[i] = type(arg)(items)
                pending.args_layout.append(slots)
            else:
                pending.args_layout.append(None)
        new_kwargs = kwargs
        if kwargs:
            new_kwargs = dict(kwargs)
            for key, value in kwargs.items():
                if key != "out" and _wants_grad(value):
                    new_kwargs[key], slot = alias_of(value, key)
                    pending.kw_layout.append(slot)
                elif isinstance(value, torch.Tensor):
                    pending.kw_layout.append(None)
        swapped = {id(alias): original for original, alias in originals}
        return tuple(new_args), new_kwargs, pending, swapped

    def _hook_input(self, alias, pending, slot):
        # a pre-hook on the alias's own ViewBackward node: it receives exactly the alias's grad,
        # and is half the cost of Tensor.register_hook (no Python handle bookkeeping)
        def on_input_grad(grad_outputs):
            pending.input_grads[slot] = grad_outputs[0]
            pending.inputs_left.discard(slot)
            if not pending.inputs_left:
                self._emit(pending)
        self.handles.append(alias.grad_fn.register_prehook(on_input_grad))

    def watch_outputs(self, pending, output):
        """Hook the outputs; `pending` comes from alias_inputs (or a fresh one when nothing was aliased)."""
        outputs = output if isinstance(output, (list, tuple)) else (output,)
        pending.out_count = len(outputs)
        for position, value in enumerate(outputs):
            if isinstance(value, torch.Tensor) and value.requires_grad and value.grad_fn is not None:
                pending.outputs_left.add(position)
                self.handles.append(value.register_hook(self._output_hook(pending, position)))
        if pending.outputs_left or pending.inputs_left:
            self.pending.append(pending)

    def new_pending(self, call):
        return _PendingBackward(call)

    def _output_hook(self, pending, position):
        def on_output_grad(grad):
            pending.output_grads[position] = grad
            pending.outputs_left.discard(position)
            if not pending.outputs_left and not pending.inputs_left and not pending.done:
                self._emit(pending)
        return on_output_grad

    # -- backward side ----------------------------------------------------------------------
    def _emit(self, pending):
        if pending.done:
            return
        pending.done = True
        grads = pending.input_grads
        of_inputs = []
        for layout in pending.args_layout:
            if isinstance(layout, list):
                of_inputs.append([grads.get(slot) if slot is not None else None for slot in layout])
            else:
                of_inputs.append(grads.get(layout) if layout is not None else None)
        of_inputs.extend(grads.get(slot) if slot is not None else None for slot in pending.kw_layout)
        of_outputs = [pending.output_grads.get(i) for i in range(pending.out_count)]
        pending.input_grads, pending.output_grads = {}, {}  # do not keep grads alive until step end
        with self.pause():
            try:  # raised inside autograd's backward it would abort the user's loss.backward()
                self.collector.backward(pending.call, of_outputs, of_inputs)
            except Exception as exc:  # noqa: BLE001
                self.collector.guard.report(pending.call.backward_name, exc)

    def flush(self):
        """Emit the entries whose grads arrived only partly (unused outputs, step end)."""
        for pending in self.pending:
            if not pending.done and (pending.input_grads or pending.output_grads):
                self._emit(pending)
        self.pending = [p for p in self.pending if not p.done]

    def remove(self):
        self.flush()
        for handle in self.handles:
            handle.remove()
        self.handles = []
        self.pending = []
