"""PyTorch's side of the seam: the `Framework` core asks for the dump adapter, hooks, perturbation ops,
the online run_ut wire packing, run_ut entry points and the rank (see msprobe/core/framework.py).

Importing this module imports no torch; each method imports what it needs when called.
"""
from typing import Any, Optional

from msprobe.core.dump.stack import StackCapture
from msprobe.core.framework import Framework

__all__ = ["TorchFramework", "TorchDumpHooks", "FRAMEWORK"]

# frames of torch's own dispatch machinery left out of stack.json
_STACK_SKIP = ("torch/overrides.py", "torch/utils/_python_dispatch.py", "torch/nn/modules/module.py",
               "torch/_tensor.py", "torch/utils/hooks.py")


class TorchDumpHooks:
    """Installs the hooks of one dump window: a TorchDumpSession (pytorch/dump/dump_session.py)."""

    def __init__(self, collector: Any, level: str) -> None:
        self.collector, self.level = collector, level

    def open(self, models):
        from msprobe.pytorch.dump.dump_session import TorchDumpSession

        # PyTorch dumps the one model given last (itself a module or a list of modules)
        return TorchDumpSession(self.collector, self.level, models[-1] if models else None)

    def add_model(self, session, model) -> None:
        """A model given while the window is open is hooked from the next window on."""

    def new_step(self) -> None:
        """Nothing kept per step: every window installs its hooks afresh."""


class TorchFramework(Framework):
    name = "pytorch"
    run_ut_executor = "msprobe.pytorch.api_accuracy_checker.executor:make_executor"
    online_runner = "msprobe.pytorch.online_run_ut.bench_ops:make_online_runner"

    def dump_adapter(self):
        from msprobe.pytorch.dump.adapter import TorchAdapter

        return TorchAdapter()

    def stack_capture(self) -> StackCapture:
        return StackCapture(skip_files=_STACK_SKIP)

    def dump_hooks(self, collector, level) -> TorchDumpHooks:
        return TorchDumpHooks(collector, level)

    def distributed_rank(self) -> Optional[int]:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return dist.get_rank()
        return None

    def perturbation_ops(self):
        from msprobe.pytorch.free_benchmark.perturb import TorchFuzzOps

        return TorchFuzzOps

    def wire_packer(self):
        from msprobe.pytorch.online_run_ut.packing import pack_tensor

        return pack_tensor

    def api_allow_list(self):
        from msprobe.pytorch.dump.api_names import api_allow_list

        return api_allow_list()

    def config_check_probe(self):
        from msprobe.pytorch.config_check import TorchConfigCheckProbe

        return TorchConfigCheckProbe()

    def replay_sizer(self):
        from msprobe.pytorch.api_accuracy_checker.replay_guard import check_replayed_call

        return check_replayed_call


FRAMEWORK = TorchFramework()
