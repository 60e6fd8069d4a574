"""Communication monitoring (`cc_distribution`) for PyTorch: the collectives of `torch.distributed`.

They are in place, so a record is the statistics of the first tensor argument, after the call
(`{api}.{k}`) and, with `cc_pre_hook`, before it (`{api}.{k}.pre`). Records, codeline filter, log-only
mode and async handling are msprobe.core.monitor.collectives'.
"""
import torch

from msprobe.core.monitor.collectives import CollectiveRecorder

__all__ = ["install_collectives", "COLLECTIVES"]

COLLECTIVES = ("all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor",
               "broadcast", "reduce", "all_to_all_single", "gather", "scatter")


def _tensors(value) -> list:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _tensors(item)]
    return []


def install_collectives(monitor, session, settings: dict) -> CollectiveRecorder:
    """Wrap the torch.distributed collectives through `session`; statistics go to `monitor.batch` as `other`."""
    def add_stat(tensor, name):
        with torch.no_grad():
            monitor.batch.add(tensor, "other", name, dedupe=False)

    recorder = CollectiveRecorder(settings, is_collecting=lambda: monitor.collecting_now, add_stat=add_stat,
                                  tensors_of=_tensors, world_size=lambda group: torch.distributed.get_world_size(group))
    recorder.install(session, torch.distributed, COLLECTIVES)
    return recorder
