"""PrecisionDebugger for PyTorch: start/stop/step around training code to dump accuracy data.

Example::

    from msprobe.pytorch import PrecisionDebugger
    debugger = PrecisionDebugger(config_path="./config.json", model=model)
    for batch in loader:
        debugger.start()
        loss = model(batch).mean(); loss.backward(); optimizer.step()
        debugger.stop()
        debugger.step()

Nothing is patched or hooked outside start()/stop(): building the optimizer, a dataloader or
another model after the debugger is fine, and a filtered-out step costs nothing.
"""
import contextlib

import torch

from msprobe.core.config import DUMP_TASKS, load_config
from msprobe.core.dump import DumpCollector, StackCapture
from msprobe.core.errors import ConfigError, UnsupportedError
from msprobe.core.log import logger

__all__ = ["PrecisionDebugger", "module_dump", "module_dump_end"]

_STACK_SKIP = ("torch/overrides.py", "torch/utils/_python_dispatch.py", "torch/nn/modules/module.py",
               "torch/_tensor.py", "torch/utils/hooks.py")


_NOBODY = object()


class _HookSession:
    """The hooks of one start()..stop() window; `remove()` leaves torch exactly as before."""

    def __init__(self, collector, level, models):
        from msprobe.pytorch.dump.api_hooks import ApiDumpMode
        from msprobe.pytorch.dump.distributed_hooks import DistributedHooks
        from msprobe.pytorch.dump.grad_tracker import GradTracker

        self.collector = collector
        self.pause_depth = 0
        self.tracker = GradTracker(collector, self.paused)
        track_grads = collector.config.wants("backward", "input") or collector.config.wants("backward", "output")
        self.track_grads = track_grads
        self.api_mode = ApiDumpMode(collector, self.tracker, track_grads) if level in ("L1", "mix") else None
        self.aten_mode = None
        if level == "L2":
            from msprobe.pytorch.dump.aten_hooks import AtenDumpMode
            self.aten_mode = AtenDumpMode(collector)
        self.module_hooks = None
        if level in ("L0", "mix"):
            from msprobe.pytorch.dump.module_hooks import ModuleHooks
            self.module_hooks = ModuleHooks(collector, self.tracker, self.paused, track_grads).install(models)
        self.dist_hooks = DistributedHooks(collector, self.paused).install() if level in ("L1", "mix") else None
        self.extra_hooks = []
        if level == "mix":
            self.extra_hooks.append(_OptimizerParent(collector))
        if self.api_mode is not None:
            self.api_mode.__enter__()
        if self.aten_mode is not None:
            self.aten_mode.__enter__()

    @contextlib.contextmanager
    def paused(self):
        """Our own tensor work inside hooks: not recorded, and not even routed through the mode
        (every `tensor.shape` would otherwise be a Python __torch_function__ call)."""
        mode = self.api_mode
        if mode is not None:
            mode.paused_depth += 1
        try:
            with torch._C.DisableTorchFunction():
                yield
        finally:
            if mode is not None:
                mode.paused_depth -= 1

    def remove(self):
        self.tracker.flush()
        if self.aten_mode is not None:
            self.aten_mode.__exit__(None, None, None)
        if self.api_mode is not None:
            self.api_mode.__exit__(None, None, None)
        for hooks in [self.module_hooks, self.dist_hooks] + self.extra_hooks:
            if hooks is not None:
                hooks.remove()
        self.tracker.remove()


class _OptimizerParent:
    """Marks calls made inside optimizer.step() with the parent "optimizer" in construct.json."""

    def __init__(self, collector):
        from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

        stack = collector.module_stack
        self.handles = [register_optimizer_step_pre_hook(lambda *_: stack.append("optimizer")),
                        register_optimizer_step_post_hook(lambda *_: stack and stack.pop())]

    def remove(self):
        for handle in self.handles:
            handle.remove()


class PrecisionDebugger:
    """Dumps statistics / tensors / overflowing APIs of a PyTorch training run (msprobe 1.2.1 layout)."""

    _instance = None

    def __init__(self, config_path=None, task=None, dump_path=None, level=None, model=None, step=None):
        self.config = load_config(config_path, task=task, dump_path=dump_path, level=level, step=step)
        if self.config.task not in DUMP_TASKS:
            raise UnsupportedError(f"PrecisionDebugger: task '{self.config.task}' is not a dump task; use one of "
                                   f"{list(DUMP_TASKS)} (run_ut has its own command: msprobe -f pytorch run_ut).")
        from msprobe.pytorch.dump.adapter import TorchAdapter

        self.model = model
        self.collector = DumpCollector(self.config, TorchAdapter(), StackCapture(skip_files=_STACK_SKIP))
        self.session = None
        PrecisionDebugger._instance = self
        logger.info(f"msprobe PrecisionDebugger: task={self.config.task} level={self.config.level} "
                    f"dump_path={self.config.dump_path}")

    # -- the user API -----------------------------------------------------------------------
    def start(self, model=None):
        """Begin dumping (installs the hooks); a no-op for steps or ranks that are filtered out."""
        if model is not None:
            self.model = model
        if self.config.level in ("L0", "mix") and self.model is None:
            raise ConfigError(f"level '{self.config.level}' dumps modules: pass model=... to PrecisionDebugger "
                              "or to start().")
        if self.session is not None:
            return
        collector = self.collector
        if not collector.start(collector.adapter.current_rank()):
            return
        self.session = _HookSession(collector, self.config.level, self.model)

    def stop(self):
        """Stop dumping: remove every hook and write this step's JSON files."""
        if self.session is not None:
            self.session.remove()
            self.session = None
        self.collector.stop()

    forward_backward_dump_end = stop

    def step(self):
        """End the step: write what is left and move on to step N+1."""
        self.stop()
        self.collector.next_step()

    def close(self):
        """Wait until every file is written (also done automatically at exit)."""
        self.stop()
        self.collector.close()

    @classmethod
    def save(cls, variable, name, save_backward=True):
        """Dump an arbitrary value (tensor or nested structure) as "{name}.{n}.debug" in debug.json;
        with save_backward the gradient of a grad-requiring tensor as "{name}_grad.{n}.debug"."""
        debugger = cls._instance
        if debugger is None or debugger.session is None:
            return
        import torch

        session = debugger.session
        with session.paused():
            index = debugger.collector.save_variable(name, variable)
        if index is None or not save_backward:
            return
        if isinstance(variable, torch.Tensor) and variable.requires_grad and torch.is_grad_enabled():
            def on_grad(grad):
                with session.paused():
                    debugger.collector.save_variable(f"{name}_grad", grad, index=index)
            session.tracker.handles.append(variable.register_hook(on_grad))


def module_dump(module, module_name):
    """Dump only `module` (as "Module.{module_name}.{Class}") until module_dump_end()."""
    debugger = PrecisionDebugger._instance
    if debugger is None or debugger.session is None:
        raise UnsupportedError("module_dump: call PrecisionDebugger(...).start() first.")
    from msprobe.pytorch.dump.module_hooks import ModuleHooks

    session = debugger.session
    hooks = ModuleHooks(debugger.collector, session.tracker, session.paused, session.track_grads, only=module)
    hooks.install(module, root_name=module_name)
    session.extra_hooks.append(hooks)
    session.exclusive = hooks
    if session.module_hooks is not None:
        session.module_hooks.only = _NOBODY  # every other module stays silent
    if session.api_mode is not None:
        session.api_mode.paused_depth += 1


def module_dump_end():
    """End module_dump(): back to the normal dump."""
    debugger = PrecisionDebugger._instance
    session = debugger.session if debugger else None
    hooks = getattr(session, "exclusive", None)
    if hooks is None:
        return
    hooks.remove()
    session.extra_hooks.remove(hooks)
    session.exclusive = None
    if session.module_hooks is not None:
        session.module_hooks.only = None
    if session.api_mode is not None:
        session.api_mode.paused_depth -= 1
