"""Collective dump: torch.distributed calls recorded as "Distributed.<name>.<n>.forward".

Collectives do not go through __torch_function__, so they are wrapped explicitly: `install()`
replaces the functions in torch.distributed (and distributed_c10d) through the session, which puts
the very same objects back at stop(). The wrappers are built once a process (each start() patches the same
ones in) and record through the DistributedHooks installed at the time of the call; outside a window (a wrapper
kept past stop()) they run the collective unrecorded. In-place collectives (all_reduce, broadcast, ...) return None
or a work handle; their output is recorded as the first tensor argument after the call. A failing
record is reported to the collector's DumpGuard and the collective runs as without msprobe.
"""
import functools

import torch

from msprobe.core.dump.session import WrapperCache
from msprobe.pytorch.dump.api_names import distributed_api_names

__all__ = ["DistributedHooks"]


class DistributedHooks:
    """Wraps the collectives while installed.

    pause: the session's context manager for our own work; reentrancy: its guard, active inside it
    (collectives call each other through the patched names: only the outer one is recorded).
    """

    def __init__(self, collector, pause, reentrancy):
        self.collector = collector
        self.pause = pause
        self.reentrancy = reentrancy

    def install(self, session):
        import torch.distributed as dist

        if not dist.is_available():
            return self
        from torch.distributed import distributed_c10d

        _ACTIVE.append(self)
        session.callback(_ACTIVE.remove, self)
        for name in distributed_api_names():
            original = getattr(dist, name, None)
            if original is None or not callable(original):
                continue
            wrapper = _wrapper(name, original)
            for namespace in (dist, distributed_c10d):
                if getattr(namespace, name, None) is original:
                    session.patch(namespace, name, wrapper)
        return self

    def record(self, key, original, args, kwargs):
        """Run the collective `original`, recorded as `key` (a wrapper's call while these hooks are installed)."""
        collector = self.collector
        if not collector.active or self.reentrancy.active:
            return original(*args, **kwargs)
        try:  # a dump failure must not reach the user's code (see core/dump/guard.py)
            with self.pause():
                call = collector.begin_forward(key, args, kwargs)
        except Exception as exc:  # noqa: BLE001
            collector.guard.report(key, exc)
            call = None
        # paused: the collective calls itself again through __torch_function__ (torch >= 2.x)
        with self.pause():
            result = original(*args, **kwargs)
        if call is None:
            return result
        try:
            with self.pause():
                collector.tensors_changed(args)
                output = result
                if result is None or not isinstance(result, torch.Tensor):
                    first = next((a for a in args if isinstance(a, (torch.Tensor, list))), None)
                    output = first if first is not None else result
                collector.end_forward(call, output)
        except Exception as exc:  # noqa: BLE001
            collector.guard.report(key, exc)
        return result


_ACTIVE = []  # the DistributedHooks installed now (the last one records)
_WRAPPERS = WrapperCache()  # collective name -> its wrapper, patched in by every install()


def _wrapper(name, original):
    """The wrapper of the collective `original` (torch.distributed.`name`): records through the installed hooks."""
    return _WRAPPERS.get(name, original, _collective)


def _collective(name, original):
    key = f"Distributed.{name}"

    @functools.wraps(original)
    def collective(*args, **kwargs):
        if not _ACTIVE:  # not installed (a reference kept past stop())
            return original(*args, **kwargs)
        return _ACTIVE[-1].record(key, original, args, kwargs)

    return collective
