"""msprobe: find where a deep-learning training run loses numerical accuracy.

Framework adapters live in ``msprobe.pytorch`` and ``msprobe.mindspore``; this package
itself imports neither framework.
"""
__version__ = "0.1.0"
__all__ = ["__version__"]
