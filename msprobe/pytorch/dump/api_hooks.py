"""API-level (L1) dump: a TorchFunctionMode that sees every torch.*, F.* and Tensor call.

While the mode runs a call's `__torch_function__`, torch takes the mode off the stack, so calls
made *inside* a recorded API (F.layer_norm calling torch.layer_norm) are not recorded again, and
neither are our own statistics kernels. Hooks that run outside that window (module hooks, grad
hooks) run their bookkeeping in the session's `paused()`, which turns torch functions off.

`a * b` reaches `__torch_function__` as Tensor.mul, like `a.mul(b)`. To write "Tensor.__mul__" as
1.2.1 does, `install()` also wraps the Tensor operators (api_names.operator_names): the wrapper
marks the call it is about to make, and the mode takes the name from the mark. Wrapping the operator dunders is
one of the non-public names docs/architecture.md lists (tests/pytorch/dump/test_pt_torch_internals.py guards it).
"""
import threading

import torch
from torch.overrides import TorchFunctionMode

from msprobe.core.dump.session import WrapperCache
from msprobe.pytorch.dump.api_names import api_table, operator_names

__all__ = ["ApiDumpMode"]

# our bookkeeping without tensor subclasses' __torch_function__ (non-public: docs/architecture.md)
_NoSubclassDispatch = torch._C.DisableTorchFunctionSubclass


class _OperatorMark(threading.local):
    key = None  # "Tensor.__mul__" from the operator wrapper, for the next __torch_function__ call


_MARK = _OperatorMark()  # one a process: the operator wrappers that set it are built once (_MARKED)
_MARKED = WrapperCache()  # operator name -> its marking wrapper, patched in by every install()


class ApiDumpMode(TorchFunctionMode):
    """Reports each recorded API call to the collector; with `track_grads` also its backward."""

    def __init__(self, collector, tracker, track_grads=True):
        super().__init__()
        self.collector = collector
        self.tracker = tracker
        self.track_grads = track_grads
        self.table = api_table()
        self.mark = _MARK
        self.silenced = False  # module_dump: only that module records

    def install(self, session):
        """Wrap the operators and enter the mode, both undone when `session` closes."""
        for name in operator_names():
            session.patch(torch.Tensor, name, _MARKED.get(name, getattr(torch.Tensor, name), _marking))
        session.enter(self)
        return self

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        mark = self.mark
        key = mark.key
        if key is not None:
            mark.key = None
        else:
            try:
                key = self.table.get(func)
            except TypeError:
                key = None
        if key is None or self.silenced or not self.collector.active:
            return func(*args, **kwargs)
        return self.record(key, func, args, kwargs)

    def record(self, key, func, args, kwargs):
        """A recorded call (`key`), its bookkeeping around it."""
        collector = self.collector
        try:  # a dump failure must not reach the user's code (see core/dump/guard.py)
            # our bookkeeping must not pay for nn.Parameter's Python __torch_function__ on every .shape
            with _NoSubclassDispatch():
                call = collector.begin_forward(key, args, kwargs)
                call.function = func  # for tasks that run the call again (free_benchmark)
                pending = None
                if call.dump and self.track_grads and torch.is_grad_enabled():
                    pending = self.tracker.begin(call, args, kwargs)
        except Exception as exc:  # noqa: BLE001
            collector.guard.report(key, exc)
            return func(*args, **kwargs)
        output = func(*args, **kwargs)
        try:
            with _NoSubclassDispatch():
                replaced = collector.end_forward(call, output)  # a task may replace the output
                if replaced is not None:
                    output = replaced
                if pending is not None:
                    self.tracker.watch_outputs(pending, output)
        except Exception as exc:  # noqa: BLE001
            collector.guard.report(key, exc)
        return output


def _marking(name, operator):
    """`operator` (Tensor.`name`, e.g. Tensor.__mul__) that names its __torch_function__ call "Tensor.`name`"."""
    mark, key = _MARK, f"Tensor.{name}"

    def marked_operator(*args, **kwargs):
        mark.key = key
        try:
            return operator(*args, **kwargs)
        finally:
            mark.key = None  # not consumed when torch functions are off (our own paused work)

    marked_operator.__name__ = getattr(operator, "__name__", name)
    marked_operator.__doc__ = getattr(operator, "__doc__", None)
    marked_operator.__wrapped__ = operator
    return marked_operator
