"""msprobe: find where a deep-learning training run loses numerical accuracy.

Framework adapters live in ``msprobe.pytorch`` and ``msprobe.mindspore``; this package
itself imports neither framework.
"""
__version__ = "0.1.0"
__all__ = ["__version__", "GradComparator"]


def __getattr__(name):
    if name == "GradComparator":  # 1.2.1's documented form: from msprobe import *; GradComparator.compare(...)
        from msprobe.core.monitor.grad_compare import GradComparator
        return GradComparator
    raise AttributeError(f"module 'msprobe' has no attribute '{name}'")
