"""ATen-level (L2) dump: a TorchDispatchMode that records every ATen op as "Aten.<op>.<n>.forward".

It works on any device and sees the ops autograd runs in backward too (they are ATen ops like
any other), so L2 has forward entries only. Our own statistics kernels run while torch has the
mode off the stack, so they are never recorded; work done in the session's `paused()` elsewhere
(debugger.save) is skipped through the reentrancy guard. A failing record is reported to the
collector's DumpGuard and the op runs as without msprobe.

The version counter of a tensor an op writes in place moves only after the mode has returned (the ADInplaceOrView
kernel bumps it around the whole redispatch), so the written arguments (the schema's `(a!)`) are told to the
collector before the outputs are described: otherwise `copy_`'s output would get the statistics of its input.
"""
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["AtenDumpMode"]


class AtenDumpMode(TorchDispatchMode):
    """Reports every ATen op to the collector."""

    def __init__(self, collector, reentrancy):
        super().__init__()
        self.collector = collector
        self.reentrancy = reentrancy
        self.names = {}
        self.writes = {}  # op -> ((position, name), ...) of the arguments it writes

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        collector = self.collector
        if not collector.active or self.reentrancy.active:
            return func(*args, **kwargs)
        key = self.names.get(func)
        if key is None:
            key = f"Aten.{func.overloadpacket.__name__}"
            self.names[func] = key
        try:  # a dump failure must not reach the user's code (see core/dump/guard.py)
            call = collector.begin_forward(key, args, kwargs)
        except Exception as exc:  # noqa: BLE001
            collector.guard.report(key, exc)
            return func(*args, **kwargs)
        output = func(*args, **kwargs)
        try:
            writes = self.writes.get(func)
            if writes is None:
                writes = self.writes[func] = _written_arguments(func)
            if writes and call.dump:
                collector.tensors_written([args[i] if i < len(args) else kwargs.get(name) for i, name in writes])
            collector.end_forward(call, output)
        except Exception as exc:  # noqa: BLE001
            collector.guard.report(key, exc)
        return output


def _written_arguments(func):
    """(position, name) of each argument `func`'s schema marks as written (`Tensor(a!)`)."""
    try:
        arguments = func._schema.arguments  # non-public, listed in docs/architecture.md (the replay guard reads it)
    except AttributeError:
        return ()
    return tuple((position, argument.name) for position, argument in enumerate(arguments)
                 if argument.alias_info is not None and argument.alias_info.is_write)
