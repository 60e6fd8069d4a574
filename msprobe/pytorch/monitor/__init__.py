"""PyTorch training-state monitoring: `TrainerMon` (activations, gradients, optimizer states, alerts) and
`GradProbe` (grad_probe summaries); `GradComparator` compares two grad_probe dumps."""

__all__ = ["TrainerMon", "GradProbe", "GradComparator", "csv2tensorboard_by_step"]

_LAZY = {"TrainerMon": "msprobe.pytorch.monitor.trainer_mon", "GradProbe": "msprobe.pytorch.monitor.grad_probe",
         "GradComparator": "msprobe.core.monitor.grad_compare", "csv2tensorboard_by_step": "msprobe.core.monitor.csv2tb"}


def __getattr__(name):
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'msprobe.pytorch.monitor' has no attribute '{name}'")
    import importlib

    return getattr(importlib.import_module(module_name), name)
