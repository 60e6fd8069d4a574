"""MindSpore adapter of msprobe: `PrecisionDebugger`, `MsprobeStep`, `seed_all`.

Attributes are imported on first use, so `msprobe -f mindspore compare` does not pay for
importing MindSpore itself.
"""
__all__ = ["PrecisionDebugger", "MsprobeStep", "seed_all", "TrainerMon", "GradComparator"]


def __getattr__(name):
    if name == "PrecisionDebugger":
        from msprobe.mindspore.debugger import PrecisionDebugger
        return PrecisionDebugger
    if name == "TrainerMon":
        from msprobe.mindspore.monitor.trainer_mon import TrainerMon
        return TrainerMon
    if name == "GradComparator":
        from msprobe.core.monitor.grad_compare import GradComparator
        return GradComparator
    if name in ("MsprobeStep", "seed_all"):
        from msprobe.mindspore.common import utils
        return getattr(utils, name)
    raise AttributeError(f"module 'msprobe.mindspore' has no attribute '{name}'")
