"""MindSpore training-state monitoring (PyNative): `TrainerMon` (csv, alerts, plots) and `GradProbe`."""

__all__ = ["TrainerMon", "GradProbe", "GradComparator"]

_LAZY = {"TrainerMon": "msprobe.mindspore.monitor.trainer_mon", "GradProbe": "msprobe.mindspore.monitor.grad_probe",
         "GradComparator": "msprobe.core.monitor.grad_compare"}


def __getattr__(name):
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'msprobe.mindspore.monitor' has no attribute '{name}'")
    import importlib

    return getattr(importlib.import_module(module_name), name)
