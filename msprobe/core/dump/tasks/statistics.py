"""The statistics task: every dumped call's descriptors with their statistics, no tensor files."""
from msprobe.core.config_fields import COMMON_FIELDS, SUMMARY_MODE, Field, integer, string, string_list
from msprobe.core.dump.tasks import Task, register_task

__all__ = ["Statistics"]


@register_task("statistics")
class Statistics(Task):
    """task "statistics": dump.json holds type, dtype, shape and the statistics of stats.STATS (Max, Min,
    Mean, Norm) of every tensor of every dumped call, plus requires_grad (PyTorch); with summary_mode "md5"
    also the CRC-32 of each tensor's bytes, with "xor" a bitwise fingerprint (stats.py) and the RNG audit
    (rng_audit.py); with "xor", bench_path and diff_nums: baseline mode (tasks/baseline.py). No tensor files.
    The default task.
    """

    config_fields = COMMON_FIELDS + (SUMMARY_MODE, Field(
        "bench_path", string, "", "with `summary_mode: \"xor\"`: a fingerprint dump of a good run; tensors are saved "
        "only for the first `diff_nums` calls that differ from it (docs/determinism.md)", listed=False),
        Field("diff_nums", integer(1), 1, "baseline mode: how many differing calls get their tensors saved",
              listed=False),
        Field("tensor_list", string_list, [], "calls whose name contains one of these strings also get their "
              "tensors in dump_tensor_data/, as with task tensor (msprobe 26.x's key)", listed=False))
