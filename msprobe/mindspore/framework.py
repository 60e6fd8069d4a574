"""MindSpore's side of the seam: the `Framework` core asks for the dump adapter, hooks, perturbation ops,
run_ut entry points and the rank (see msprobe/core/framework.py). No online run_ut wire packing (PyTorch only).

Importing this module imports no mindspore; each method imports what it needs when called.
"""
from typing import Optional

from msprobe.core.framework import Framework

__all__ = ["MindSporeFramework", "FRAMEWORK"]


class MindSporeFramework(Framework):
    name = "mindspore"
    rank_env_keys = ("RANK_ID", "RANK")  # set by msrun before the communication is initialised
    run_ut_executor = "msprobe.mindspore.api_accuracy_checker.executor:make_executor"

    def dump_adapter(self):
        from msprobe.mindspore.dump.adapter import get_adapter

        return get_adapter()

    def dump_hooks(self, collector, level):
        from msprobe.mindspore.dump.hooks import MindSporeHooks

        return MindSporeHooks(collector, level)

    def distributed_rank(self) -> Optional[int]:
        try:
            from mindspore.communication import get_rank
            from mindspore.communication._comm_helper import _is_initialized

            if _is_initialized():
                return int(get_rank())
        except Exception:  # noqa: BLE001 - any failure means "not distributed"
            pass
        return None

    def perturbation_ops(self):
        from msprobe.mindspore.free_benchmark.perturb import MindSporeFuzzOps

        return MindSporeFuzzOps

    def api_allow_list(self):
        from msprobe.mindspore.dump.api_registry import api_allow_list

        return api_allow_list()

    def config_check_probe(self):
        from msprobe.mindspore.config_check import MindSporeConfigCheckProbe

        return MindSporeConfigCheckProbe()


FRAMEWORK = MindSporeFramework()
