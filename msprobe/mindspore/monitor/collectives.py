"""Communication monitoring (`cc_distribution`) for MindSpore: the collectives of `mindspore.mint.distributed`
(in place, torch-like) and of `mindspore.communication.comm_func` (functional: the result is recorded).

Records, codeline filter and log-only mode are msprobe.core.monitor.collectives'. Only calls made through
the module attribute are seen (`mint.distributed.all_reduce(...)`, or a name imported after the monitor
was set up); primitives inside cells (ops.AllReduce of DistributedGradReducer) are not.
"""
from mindspore import Tensor

from msprobe.core.monitor.collectives import CollectiveRecorder

__all__ = ["install_collectives", "MINT_COLLECTIVES", "COMM_FUNC_COLLECTIVES"]

MINT_COLLECTIVES = ("all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor",
                    "broadcast", "reduce", "all_to_all", "all_to_all_single", "gather", "scatter")
COMM_FUNC_COLLECTIVES = ("all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor", "broadcast", "reduce",
                         "gather_into_tensor", "scatter_tensor", "all_to_all_with_output_shape",
                         "all_to_all_single_with_output_shape")


def _tensors(value) -> list:
    if isinstance(value, Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _tensors(item)]
    return []


def _world_size(group) -> int:
    from mindspore.mint import distributed

    return distributed.get_world_size(group) if group is not None else distributed.get_world_size()


def install_collectives(monitor, session, settings: dict) -> CollectiveRecorder:
    """Wrap the collectives through `session`; statistics go to `monitor.batch` as `other` records."""
    from mindspore.communication import comm_func
    from mindspore.mint import distributed

    recorder = CollectiveRecorder(settings, is_collecting=lambda: monitor.collecting_now,
                                  add_stat=lambda tensor, name: monitor.batch.add(tensor, "other", name),
                                  tensors_of=_tensors, world_size=_world_size)
    recorder.install(session, distributed, MINT_COLLECTIVES)
    recorder.install(session, comm_func, COMM_FUNC_COLLECTIVES, functional=True)
    return recorder
