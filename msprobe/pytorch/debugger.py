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

The lifecycle (start/stop/step/close/save/collect, one active debugger) is core's DebuggerBase
(msprobe/core/debugger_base.py); this class adds what is PyTorch's own: the model argument, the
DataLoader driver, deterministic mode, save()'s gradient hook and module_dump.
"""

from msprobe.core.debugger_base import DebuggerBase
from msprobe.core.errors import ConfigError, UnsupportedError

__all__ = ["PrecisionDebugger", "module_dump", "module_dump_end"]


class PrecisionDebugger(DebuggerBase):
    """Dumps statistics / tensors / overflowing APIs of a PyTorch training run (msprobe 1.2.1 layout)."""

    framework_name = "pytorch"

    def __init__(self, config_path=None, task=None, dump_path=None, level=None, model=None, step=None):
        super().__init__(config_path, task=task, dump_path=dump_path, level=level, step=step)
        if model is not None:
            self.models = [model]

    @property
    def model(self):
        """The model whose modules are dumped (L0 / mix): the one given last."""
        return self.models[-1] if self.models else None

    # -- what is PyTorch's own ----------------------------------------------------------------
    def _make_grad_probe(self):
        from msprobe.pytorch.monitor.grad_probe import GradProbe

        return GradProbe(self.config)

    def _prepare(self):
        if self.config.level in ("L1", "mix"):
            from msprobe.pytorch.dump.api_names import api_table

            api_table()  # a broken API list stops here, not in the middle of the first step
        if self.config.is_deterministic:
            from msprobe.pytorch.seed import enable_deterministic

            enable_deterministic()
        return None

    def _make_driver(self):
        if not self.config.enable_dataloader:
            return None
        from msprobe.pytorch.dump.dataloader_driver import DataLoaderDriver

        return DataLoaderDriver(self)

    def _remember(self, model):
        self.models = [model]  # start(model) replaces the model given before

    def _check_models(self):
        if self.config.level in ("L0", "mix") and not self.models:
            raise ConfigError(f"level '{self.config.level}' dumps modules: pass model=... to PrecisionDebugger "
                              "or to start().")

    def monitor(self, model, optimizer=None):
        """task grad_probe: record gradient summaries of `model` before each step of `optimizer` (by
        default the first optimizer that updates the model's parameters); see docs/grad_probe.md."""
        if self.grad_probe is None:
            raise UnsupportedError(f"monitor() belongs to task 'grad_probe'; this debugger's task is "
                                   f"'{self.config.task}' (use start()/stop()/step()).")
        self.grad_probe.monitor(model, optimizer=optimizer)

    def _save(self, variable, name, save_backward):
        import torch

        session, collector = self.session, self.collector
        with session.paused():
            index = collector.save_variable(name, variable)
        if index is None or not save_backward:
            return
        if isinstance(variable, torch.Tensor) and variable.requires_grad and torch.is_grad_enabled():
            def on_grad(grad):
                with session.paused():
                    collector.save_variable(f"{name}_grad", grad, index=index)
            session.tracker.handles.append(variable.register_hook(on_grad))


def module_dump(module, module_name):
    """Dump only `module` (as "Module.{module_name}.{Class}") until module_dump_end()."""
    debugger = PrecisionDebugger.active()
    if debugger is None or debugger.session is None:
        raise UnsupportedError("module_dump: call PrecisionDebugger(...).start() first.")
    debugger.session.dump_only(module, module_name)


def module_dump_end():
    """End module_dump(): back to the normal dump."""
    debugger = PrecisionDebugger.active()
    if debugger is not None and debugger.session is not None:
        debugger.session.dump_all()
