"""msprobe for PyTorch: PrecisionDebugger (data dump), seed_all, module_dump, compare.

Importing this package imports torch but installs nothing: hooks exist only between
PrecisionDebugger.start() and stop().
"""
from msprobe.pytorch.compare import compare, compare_distributed
from msprobe.pytorch.debugger import PrecisionDebugger, module_dump, module_dump_end
from msprobe.pytorch.seed import seed_all

__all__ = ["PrecisionDebugger", "seed_all", "module_dump", "module_dump_end", "compare", "compare_distributed"]
