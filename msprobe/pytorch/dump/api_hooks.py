"""API-level (L1) dump: a TorchFunctionMode that sees every torch.*, F.* and Tensor call.

While the mode runs a call's `__torch_function__`, torch takes the mode off the stack, so calls
made *inside* a recorded API (F.layer_norm calling torch.layer_norm) are not recorded again, and
neither are our own statistics kernels. Hooks that run outside that window (module hooks, grad
hooks) run their bookkeeping in the session's `paused()`, which turns torch functions off.

`a * b` reaches `__torch_function__` as Tensor.mul, like `a.mul(b)`. To write "Tensor.__mul__" as
1.2.1 does, `install()` also wraps the Tensor operators (api_names.operator_names): the wrapper
marks the call it is about to make, and the mode takes the name from the mark.

A recorded call's bookkeeping (the collector's begin_forward / end_forward, the grad tracker's begin / watch_outputs)
runs in one C call where the extension is built and the collector's common case holds (`DumpCollector.lane_ok`): the
lane (_grad_walk.c's Lane) does what the Python path below does, step for step, and hands back the calls it does not
take (with MSPROBE_NATIVE_STATS=0 there is no lane). Where the lane runs, the method below is itself replaced on the
mode instance by its C twin (_grad_walk.c's ModeEntry; not beside compiled regions).
"""
import threading

import torch
from torch.overrides import TorchFunctionMode

from msprobe.core.dump.collector import ForwardCall
from msprobe.core.dump.session import WrapperCache
from msprobe.pytorch.dump import grad_tracker
from msprobe.pytorch.dump.api_names import api_table, operator_names

__all__ = ["ApiDumpMode"]

_NoSubclassDispatch = torch._C.DisableTorchFunctionSubclass
_REFERENCE = object()  # what the lane returns for a call it leaves to the Python path


class _OperatorMark(threading.local):
    key = None  # "Tensor.__mul__" from the operator wrapper, for the next __torch_function__ call


_MARK = _OperatorMark()  # one a process: the operator wrappers that set it are built once (_MARKED)
_MARKED = WrapperCache()  # operator name -> its marking wrapper, patched in by every install()


class ApiDumpMode(TorchFunctionMode):
    """Reports each recorded API call to the collector; with `track_grads` also its backward."""

    def __init__(self, collector, tracker, track_grads=True, direct=True):
        super().__init__()
        # direct: __torch_function__ itself in C (_grad_walk.c's ModeEntry, set on this instance) where the lane runs;
        # not beside compiled regions, whose tracing reads the mode's method
        self.direct = direct
        self.collector = collector
        self.tracker = tracker
        self.track_grads = track_grads
        self.table = api_table()
        self.mark = _MARK
        self.silenced = False  # module_dump: only that module records
        self.lane = None

    def install(self, session):
        """Wrap the operators and enter the mode, both undone when `session` closes."""
        self.lane = _lane_for(self.collector, self.tracker if self.track_grads else None)
        if self.lane is not None and self.direct and grad_tracker.ModeEntry is not None:
            self.__dict__["__torch_function__"] = grad_tracker.ModeEntry(
                self.lane, self, self.mark, self.table, self.record, self.__torch_function__)
            session.callback(lambda: self.__dict__.pop("__torch_function__", None))
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
        lane = self.lane
        if lane is not None:
            output = lane(key, func, args, kwargs)  # what record() does, in C
            if output is not _REFERENCE:
                return output
        return self.record(key, func, args, kwargs)

    def record(self, key, func, args, kwargs):
        """A recorded call (`key`), its bookkeeping around it: the Python path (the reference of the lane)."""
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


def _lane_for(collector, tracker):
    """The C lane for this collector (None: the Python path only): its common case, the extension, the switch."""
    if grad_tracker.Lane is None or not collector.lane_ok:
        return None
    return grad_tracker.Lane(collector, tracker, ForwardCall, grad_tracker.PendingBackward, _NoSubclassDispatch,
                             torch.is_grad_enabled, None if tracker is None else grad_tracker.next_sequence_nr,
                             _REFERENCE)


def _marking(name, operator):
    """`operator` (Tensor.`name`, e.g. Tensor.__mul__) that names its __torch_function__ call "Tensor.`name`" (the
    closure below, or its C twin where the extension is built: no Python frame for every `a * b`)."""
    mark, key = _MARK, f"Tensor.{name}"
    if grad_tracker.MarkedOperator is not None:
        return grad_tracker.MarkedOperator(key, operator, mark)

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
