"""PrecisionDebugger for PyTorch: start/stop/step around training code to dump accuracy data.

Example::

    from msprobe.pytorch import PrecisionDebugger
    debugger = PrecisionDebugger(config_path="./config.json", model=model)
    for batch in loader:
        with debugger.collect(model):          # or debugger.start() ... debugger.stop()
            loss = model(batch).mean(); loss.backward(); optimizer.step()
        debugger.step()

Nothing is patched or hooked outside start()/stop(): building the optimizer, a dataloader or
another model after the debugger is fine, a filtered-out step costs nothing, and stop() leaves torch
exactly as it was (every hook goes through one HookSession, see dump/dump_session.py). With
`"enable_dataloader": true` the DataLoader's iteration drives start/stop/step instead (see
dump/dataloader_driver.py).
"""

from msprobe.core.config import DUMP_TASKS, load_config
from msprobe.core.dump import DumpCollector, StackCapture
from msprobe.core.errors import ConfigError, MsprobeError, UnsupportedError
from msprobe.core.dump.session import CollectWindow
from msprobe.core.log import logger

__all__ = ["PrecisionDebugger", "module_dump", "module_dump_end"]

_STACK_SKIP = ("torch/overrides.py", "torch/utils/_python_dispatch.py", "torch/nn/modules/module.py",
               "torch/_tensor.py", "torch/utils/hooks.py")


class PrecisionDebugger(CollectWindow):
    """Dumps statistics / tensors / overflowing APIs of a PyTorch training run (msprobe 1.2.1 layout)."""

    _instance = None

    def __init__(self, config_path=None, task=None, dump_path=None, level=None, model=None, step=None):
        self.config = load_config(config_path, task=task, dump_path=dump_path, level=level, step=step)
        self.grad_probe = None
        if self.config.task == "grad_probe":  # gradient monitoring: monitor(model) instead of start/stop
            from msprobe.pytorch.monitor.grad_probe import GradProbe

            self.grad_probe, self.model, self.session, self.driver = GradProbe(self.config), model, None, None
            PrecisionDebugger._instance = self
            return
        if self.config.task not in DUMP_TASKS:
            raise UnsupportedError(f"PrecisionDebugger: task '{self.config.task}' is not a dump task; use one of "
                                   f"{list(DUMP_TASKS)} (run_ut has its own command: msprobe -f pytorch run_ut).")
        from msprobe.pytorch.dump.adapter import TorchAdapter

        if self.config.level in ("L1", "mix"):
            from msprobe.pytorch.dump.api_names import api_table

            api_table()  # a broken API list stops here, not in the middle of the first step
        if self.config.is_deterministic:
            from msprobe.pytorch.seed import enable_deterministic

            enable_deterministic()
        self.model = model
        self.collector = DumpCollector(self.config, TorchAdapter(), StackCapture(skip_files=_STACK_SKIP))
        self.session = None
        self.driver = None
        PrecisionDebugger._instance = self
        logger.info(f"msprobe PrecisionDebugger: task={self.config.task} level={self.config.level} "
                    f"dump_path={self.config.dump_path}")
        if self.config.enable_dataloader:
            from msprobe.pytorch.dump.dataloader_driver import DataLoaderDriver

            self.driver = DataLoaderDriver(self)

    # -- the user API -----------------------------------------------------------------------
    def monitor(self, model, optimizer=None):
        """task grad_probe: record gradient summaries of `model` before each step of `optimizer` (by
        default the first optimizer that updates the model's parameters); see docs/grad_probe.md."""
        if self.grad_probe is None:
            raise UnsupportedError(f"monitor() belongs to task 'grad_probe'; this debugger's task is "
                                   f"'{self.config.task}' (use start()/stop()/step()).")
        self.grad_probe.monitor(model, optimizer=optimizer)

    def start(self, model=None):
        """Begin dumping (installs the hooks); a no-op for steps or ranks that are filtered out
        (and when enable_dataloader drives the steps)."""
        if self.driver is None and self.grad_probe is None:
            self.begin_window(model)

    def stop(self):
        """Stop dumping: remove every hook and write this step's JSON files (grad_probe: stop monitoring)."""
        if self.grad_probe is not None:
            self.grad_probe.stop()
        elif self.driver is None:
            self.end_window()

    forward_backward_dump_end = stop

    def step(self):
        """End the step: write what is left and move on to step N+1 (grad_probe counts optimizer steps)."""
        if self.driver is None and self.grad_probe is None:
            self.next_step()

    def close(self):
        """Wait until every file is written (also done automatically at exit)."""
        if self.grad_probe is not None:
            self.grad_probe.stop()
            return
        if self.driver is not None:
            self.driver.close()
        self.end_window()
        self.collector.close()

    # -- the window, also driven by enable_dataloader ---------------------------------------
    def begin_window(self, model=None):
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
        from msprobe.pytorch.dump.dump_session import TorchDumpSession

        try:
            self.session = TorchDumpSession(collector, self.config.level, self.model)
        except MsprobeError:
            collector.stop()
            raise
        except Exception as exc:  # noqa: BLE001 - rolled back; the user's step runs undumped
            collector.stop()
            collector.guard.report("PrecisionDebugger.start", exc)

    def end_window(self):
        if self.session is not None:
            session, self.session = self.session, None
            session.close()
        self.collector.stop()

    def next_step(self):
        self.end_window()
        self.collector.next_step()

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
    debugger.session.dump_only(module, module_name)


def module_dump_end():
    """End module_dump(): back to the normal dump."""
    debugger = PrecisionDebugger._instance
    if debugger is not None and debugger.session is not None:
        debugger.session.dump_all()
