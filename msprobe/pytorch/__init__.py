"""msprobe for PyTorch: PrecisionDebugger (data dump), seed_all, module_dump; `compare` is loaded lazily.

Importing this package imports torch but installs nothing: hooks exist only between
PrecisionDebugger.start() and stop().
"""
from msprobe.pytorch.debugger import PrecisionDebugger, module_dump, module_dump_end
from msprobe.pytorch.seed import seed_all

__all__ = ["PrecisionDebugger", "seed_all", "module_dump", "module_dump_end", "compare"]


def __getattr__(name):
    if name == "compare":  # written by the compare area; imported on first use only
        from msprobe.pytorch.compare import compare
        return compare
    raise AttributeError(f"module 'msprobe.pytorch' has no attribute {name!r}")
