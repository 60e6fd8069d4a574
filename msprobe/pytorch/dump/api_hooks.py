"""API-level (L1) dump: a TorchFunctionMode that sees every torch.*, F.* and Tensor call.

While the mode runs a call's `__torch_function__`, torch takes the mode off the stack, so calls
made *inside* a recorded API (F.layer_norm calling torch.layer_norm) are not recorded again, and
neither are our own statistics kernels. Hooks that run outside that window (module hooks, grad
hooks) use `paused()` so their tensor ops stay out of the dump.
"""
import contextlib

import torch
from torch.overrides import TorchFunctionMode

from msprobe.pytorch.dump.api_names import api_table

__all__ = ["ApiDumpMode"]

_NoSubclassDispatch = torch._C.DisableTorchFunctionSubclass


class ApiDumpMode(TorchFunctionMode):
    """Reports each recorded API call to the collector; with `track_grads` also its backward."""

    def __init__(self, collector, tracker, track_grads=True):
        super().__init__()
        self.collector = collector
        self.tracker = tracker
        self.track_grads = track_grads
        self.table = api_table()
        self.paused_depth = 0

    @contextlib.contextmanager
    def paused(self):
        self.paused_depth += 1
        try:
            yield
        finally:
            self.paused_depth -= 1

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        try:
            key = self.table.get(func)
        except TypeError:
            key = None
        if key is None or self.paused_depth or not self.collector.active:
            return func(*args, **kwargs)
        collector = self.collector
        try:  # a dump failure must not reach the user's code (see core/dump/guard.py)
            # our bookkeeping must not pay for nn.Parameter's Python __torch_function__ on every .shape
            with _NoSubclassDispatch():
                call = collector.begin_forward(key, args, kwargs)
                pending = None
                if call.dump and self.track_grads and torch.is_grad_enabled():
                    pending = self.tracker.begin(call, args, kwargs)
        except Exception as exc:  # noqa: BLE001
            collector.guard.report(key, exc)
            return func(*args, **kwargs)
        output = func(*args, **kwargs)
        try:
            with _NoSubclassDispatch():
                collector.end_forward(call, output)
                if pending is not None:
                    self.tracker.watch_outputs(pending, output)
        except Exception as exc:  # noqa: BLE001
            collector.guard.report(key, exc)
        return output

