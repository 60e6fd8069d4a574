"""msprobe for PyTorch: PrecisionDebugger (data dump), seed_all, module_dump, compare.

Example::

    from msprobe.pytorch import PrecisionDebugger
    debugger = PrecisionDebugger(config_path="config.json", model=model)
    debugger.start(); ...; debugger.stop(); debugger.step()

Everything is imported on first use: `msprobe -f pytorch compare` (which needs no torch in
statistics mode) does not pay for importing torch, and run_ut does not pay for the compare code.
Nothing is hooked until `start()`.
"""

__all__ = ["PrecisionDebugger", "seed_all", "module_dump", "module_dump_end", "compare", "compare_distributed",
           "TrainerMon", "GradComparator", "compile_check"]

_LAZY = {"PrecisionDebugger": "msprobe.pytorch.debugger", "module_dump": "msprobe.pytorch.debugger",
         "module_dump_end": "msprobe.pytorch.debugger", "seed_all": "msprobe.pytorch.seed",
         "compare": "msprobe.pytorch.compare", "compare_distributed": "msprobe.pytorch.compare",
         "TrainerMon": "msprobe.pytorch.monitor.trainer_mon", "GradComparator": "msprobe.core.monitor.grad_compare",
         "compile_check": "msprobe.pytorch.compile_check"}


def __getattr__(name):
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'msprobe.pytorch' has no attribute '{name}'")
    import importlib

    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value  # after the import, which binds the submodule `compare` to this name
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
