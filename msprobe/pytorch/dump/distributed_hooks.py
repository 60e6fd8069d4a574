"""Collective dump: torch.distributed calls recorded as "Distributed.<name>.<n>.forward".

Collectives do not go through __torch_function__, so they are wrapped explicitly: `install()`
replaces the functions in torch.distributed (and distributed_c10d) and `remove()` puts the very
same objects back. In-place collectives (all_reduce, broadcast, ...) return None or a work
handle; their output is recorded as the first tensor argument after the call.
"""
import functools

import torch

from msprobe.pytorch.dump.api_names import distributed_api_names

__all__ = ["DistributedHooks"]


class DistributedHooks:
    """Wraps the collectives while installed."""

    def __init__(self, collector, pause):
        self.collector = collector
        self.pause = pause
        self.saved = []
        self.depth = 0  # collectives call each other through the patched names: record the outer one

    def install(self):
        import torch.distributed as dist

        if not dist.is_available():
            return self
        from torch.distributed import distributed_c10d

        for name in distributed_api_names():
            original = getattr(dist, name, None)
            if original is None or not callable(original):
                continue
            wrapper = self._wrap(name, original)
            for namespace in (dist, distributed_c10d):
                if getattr(namespace, name, None) is original:
                    self.saved.append((namespace, name, original))
                    setattr(namespace, name, wrapper)
        return self

    def _wrap(self, name, original):
        key = f"Distributed.{name}"

        @functools.wraps(original)
        def collective(*args, **kwargs):
            collector = self.collector
            if not collector.active or self.depth:
                return original(*args, **kwargs)
            self.depth += 1
            try:
                with self.pause():
                    call = collector.begin_forward(key, args, kwargs)
                    result = original(*args, **kwargs)
            finally:
                self.depth -= 1
            with self.pause():
                collector.tensors_changed(args)
                output = result
                if result is None or not isinstance(result, torch.Tensor):
                    first = next((a for a in args if isinstance(a, (torch.Tensor, list))), None)
                    output = first if first is not None else result
                collector.end_forward(call, output)
            return result
        return collective

    def remove(self):
        for namespace, name, original in reversed(self.saved):
            setattr(namespace, name, original)
        self.saved = []
