"""The statistics task: every dumped call's descriptors with their statistics, no tensor files."""
from msprobe.core.dump.tasks import Task, register_task

__all__ = ["Statistics"]


@register_task("statistics")
class Statistics(Task):
    """task "statistics": dump.json holds type, dtype, shape and the statistics of stats.STATS (Max, Min,
    Mean, Norm) of every tensor of every dumped call, plus requires_grad (PyTorch).

    config.json, "statistics" section:
      scope, list, data_mode   which calls and which of their inputs/outputs (see filters.py)
      summary_mode             "statistics" (default), "md5": also the CRC-32 of each tensor's bytes, or "xor":
                               also a bitwise fingerprint (stats.py) and the RNG audit (rng_audit.py)
      bench_path, diff_nums    with "xor": baseline mode (tasks/baseline.py)
    """
