"""ATen-level (L2) dump: a TorchDispatchMode that records every ATen op as "Aten.<op>.<n>.forward".

It works on any device and sees the ops autograd runs in backward too (they are ATen ops like
any other), so L2 has forward entries only. Our own statistics kernels run while torch has the
mode off the stack, so they are never recorded.
"""
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["AtenDumpMode"]


class AtenDumpMode(TorchDispatchMode):
    """Reports every ATen op to the collector."""

    def __init__(self, collector):
        super().__init__()
        self.collector = collector
        self.names = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        collector = self.collector
        if not collector.active:
            return func(*args, **kwargs)
        key = self.names.get(func)
        if key is None:
            key = f"Aten.{func.overloadpacket.__name__}"
            self.names[func] = key
        call = collector.begin_forward(key, args, kwargs)
        output = func(*args, **kwargs)
        collector.end_forward(call, output)
        return output
