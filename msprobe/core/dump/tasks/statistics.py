"""The statistics task: every dumped call's descriptors with their statistics, no tensor files."""
from msprobe.core.config_fields import COMMON_FIELDS, SUMMARY_MODE
from msprobe.core.dump.tasks import Task, register_task

__all__ = ["Statistics"]


@register_task("statistics")
class Statistics(Task):
    """task "statistics": dump.json holds type, dtype, shape and the statistics of stats.STATS (Max, Min,
    Mean, Norm) of every tensor of every dumped call, plus requires_grad (PyTorch); with summary_mode "md5"
    also the CRC-32 of each tensor's bytes. No tensor files. The default task.
    """

    config_fields = COMMON_FIELDS + (SUMMARY_MODE,)
