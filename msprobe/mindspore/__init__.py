"""MindSpore adapter of msprobe: `PrecisionDebugger`, `MsprobeStep`, `seed_all`.

Attributes are imported on first use, so `msprobe -f mindspore compare` does not pay for
importing MindSpore itself.
"""
__all__ = ["PrecisionDebugger", "MsprobeStep", "seed_all"]


def __getattr__(name):
    if name == "PrecisionDebugger":
        from msprobe.mindspore.debugger import PrecisionDebugger
        return PrecisionDebugger
    if name in ("MsprobeStep", "seed_all"):
        from msprobe.mindspore.common import utils
        return getattr(utils, name)
    raise AttributeError(f"module 'msprobe.mindspore' has no attribute '{name}'")
