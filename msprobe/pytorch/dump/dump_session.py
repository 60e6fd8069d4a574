"""The hooks of one start()..stop() window, all installed through one core HookSession.

    session = TorchDumpSession(collector, "mix", model)   # installs; a failing step undoes the others
    ...
    session.close()                                       # torch exactly as before start()

What a level installs: L0 module/parameter hooks; L1 the TorchFunctionMode, the Tensor operator
wrappers and the patched collectives; mix both plus the optimizer step hooks (construct.json parent
"optimizer"); L2 the TorchDispatchMode. Grad hooks that the calls leave on outputs and autograd
nodes are removed by the GradTracker, whose removal is the session's last undo step.
"""

import functools

import torch

from msprobe.core.dump.session import HookSession, Reentrancy, fewer_collections
from msprobe.pytorch.dump import grad_tracker

__all__ = ["TorchDumpSession"]


class TorchDumpSession:
    """Installs the hooks for `level` on `models`; `close()` removes them all."""

    def __init__(self, collector, level, models):
        self.collector = collector
        self.hooks = HookSession()
        self.reentrancy = Reentrancy()
        # our own work inside hooks: not recorded, and not even routed through the modes (every `tensor.shape` would
        # otherwise be a Python __torch_function__ call)
        self.paused = functools.partial(_Paused, self.reentrancy)
        self.tracker = grad_tracker.GradTracker(collector, self.paused)
        wants = collector.config.wants
        self.track_grads = wants("backward", "input") or wants("backward", "output")
        self.api_mode = self.aten_mode = self.module_hooks = self.exclusive = None
        from msprobe.pytorch.dump.compiled import CompiledRegions, find_regions

        self.regions = find_regions(models)
        with self.hooks.installing():
            # undone last: the young threshold comes back after the tracker has dropped the step's pending records
            # and hooks, so the collection that follows walks the survivors only, not the whole step's bookkeeping
            fewer_collections(self.hooks)  # the step's records would otherwise set off full collections
            self.hooks.callback(self.tracker.remove)  # pending backward entries are flushed
            if level in ("L0", "mix"):
                from msprobe.pytorch.dump.module_hooks import ModuleHooks

                self.module_hooks = ModuleHooks(collector, self.tracker, self.paused, self.track_grads,
                                                outside_dynamo=bool(self.regions))
                self.module_hooks.install(models, self.hooks)
            if level == "mix":
                install_optimizer_parent(collector, self.hooks)
            if level in ("L1", "mix"):
                from msprobe.pytorch.dump.api_hooks import ApiDumpMode
                from msprobe.pytorch.dump.distributed_hooks import DistributedHooks

                DistributedHooks(collector, self.paused, self.reentrancy).install(self.hooks)
                self.api_mode = ApiDumpMode(collector, self.tracker, self.track_grads).install(self.hooks)
            if level == "L2":
                from msprobe.pytorch.dump.aten_hooks import AtenDumpMode

                self.aten_mode = self.hooks.enter(AtenDumpMode(collector, self.reentrancy))
            if self.regions:
                section = collector.config.section
                CompiledRegions(collector, self.regions, level in ("L0", "mix"), self._modes,
                                interpret=section.get("interpret_compiled", False),
                                shadow=section.get("shadow_compiled", False)).install(self.hooks)

    def _modes(self):
        return [mode for mode in (self.api_mode, self.aten_mode) if mode is not None]

    def close(self):
        self.hooks.close()

    # -- module_dump ------------------------------------------------------------------------
    def dump_only(self, module, module_name):
        """Record only `module` (named `module_name`) until `dump_all()`."""
        from msprobe.pytorch.dump.module_hooks import ModuleHooks

        self.dump_all()
        exclusive = HookSession()
        with exclusive.installing():
            ModuleHooks(self.collector, self.tracker, self.paused, self.track_grads, only=module,
                        outside_dynamo=bool(self.regions)).install(
                module, exclusive, root_name=module_name)
            if self.module_hooks is not None:
                exclusive.patch(self.module_hooks, "only", _NOBODY)  # every other module stays silent
            if self.api_mode is not None:
                exclusive.patch(self.api_mode, "silenced", True)
        self.exclusive = exclusive
        self.hooks.callback(exclusive.close)  # stop() ends it too

    def dump_all(self):
        if self.exclusive is not None:
            self.exclusive.close()
            self.exclusive = None


_NOBODY = object()


class _Paused:
    """The context of `TorchDumpSession.paused()`: inside the reentrancy guard, torch functions off
    (torch._C.DisableTorchFunction, non-public: docs/architecture.md). A class rather than a generator-based context
    manager: it runs two to four times per recorded call."""
    __slots__ = ("reentrancy", "off")

    def __init__(self, reentrancy):
        self.reentrancy = reentrancy
        self.off = torch._C.DisableTorchFunction()

    def __enter__(self):
        self.reentrancy.enter()
        try:
            self.off.__enter__()
        except BaseException:
            self.reentrancy.leave()
            raise
        return self

    def __exit__(self, *exc_info):
        try:
            self.off.__exit__(*exc_info)
        finally:
            self.reentrancy.leave()
        return False


def install_optimizer_parent(collector, session):
    """Calls made inside optimizer.step() get the parent "optimizer" in construct.json."""
    from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

    def enter_step(*_):
        collector.enter_region("optimizer")

    def leave_step(*_):
        collector.leave_region("optimizer")

    session.add_handle(register_optimizer_step_pre_hook(enter_step))
    session.add_handle(register_optimizer_step_post_hook(leave_step))
