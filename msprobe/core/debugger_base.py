"""The one PrecisionDebugger state machine both frameworks share: start/stop/step/close/save/collect.

A framework's `PrecisionDebugger` subclasses `DebuggerBase`, names its framework and adds only what is its
own (PyTorch: the DataLoader driver, module_dump; MindSpore: the L2 graph dump). The base owns:

* the task list: every dump task the registry lists for the framework (flight_recorder included), plus
  grad_probe, which `monitor(...)` drives instead of start/stop;
* the one-instance rule: creating a debugger closes the previous one (two sets of hooks would undo each
  other), whichever framework it belongs to;
* the window: start() installs the dump level's hooks through the framework's `DumpHooks` (a failed
  install is rolled back and reported; the step runs undumped), stop() removes them and hands the step's
  files to the writer, step() moves on and closes the debugger after the last configured step;
* a `driver` that takes the lifecycle over (the DataLoader, or MindSpore's native graph dump).

States: idle -> start() -> window open -> stop() -> idle -> step() -> idle (next step) ... -> close().
"""
from typing import Any, ClassVar, List, Optional, Protocol, Sequence, Tuple

from msprobe.core.config import dump_task_names, load_config
from msprobe.core.dump.collector import DumpCollector
from msprobe.core.dump.session import CollectWindow
from msprobe.core.dump.switch import DumpSwitch
from msprobe.core.errors import ConfigError, MsprobeError, UnsupportedError
from msprobe.core.framework import DumpHooks, Framework, WindowSession, current_rank, get_framework
from msprobe.core.log import logger

__all__ = ["DebuggerBase", "LifecycleDriver", "TaskNotForDebugger"]


class TaskNotForDebugger(ConfigError, UnsupportedError):
    """The config's task is not one PrecisionDebugger runs (run_ut has its own command)."""


class LifecycleDriver(Protocol):
    """Something that drives the dump instead of the window: the user's start()/step()/close() go to it."""

    def start(self) -> None: ...

    def step(self) -> None: ...

    def close(self) -> None: ...


class GradMonitor(Protocol):
    """Task grad_probe's monitor (core/monitor/grad_summary.py GradProbeBase)."""

    def stop(self) -> None: ...


class DebuggerBase(CollectWindow):
    """Shared lifecycle of the framework debuggers; subclasses set `framework_name`. `with
    debugger.collect(model):` (CollectWindow) is start(model) ... stop() around a block."""

    #: the adapter package this debugger belongs to ("pytorch", "mindspore")
    framework_name: ClassVar[str]
    #: the one active debugger of the process (module-level state the design allows, held here)
    _active: ClassVar[Optional["DebuggerBase"]] = None

    config: Any
    framework: Framework
    collector: Optional[DumpCollector]
    hooks: Optional[DumpHooks]
    session: Optional[WindowSession]
    driver: Optional[LifecycleDriver]
    grad_probe: Optional[GradMonitor]
    models: List[Any]

    def __init__(self, config_path: Optional[str] = None, task: Optional[str] = None,
                 dump_path: Optional[str] = None, level: Optional[str] = None, step: Optional[Any] = None) -> None:
        self.framework = get_framework(self.framework_name)
        self.config = load_config(config_path, framework=self.framework.name, task=task, dump_path=dump_path,
                                  level=level, step=step)
        self.collector = self.hooks = self.session = self.driver = self.grad_probe = None
        self.models = []
        # dump_enable set in the file: it is looked at again at each start()/step() (core/dump/switch.py)
        self.switch = DumpSwitch(config_path, self.config.dump_enable) \
            if config_path and self.config.dump_enable is not None else None
        self.rank_id: Optional[int] = None  # start(rank_id=...): the rank when no process group says it
        self.token_range: Optional[Tuple[int, int]] = None  # start(token_range=...): forwards of the model dumped
        self._token_hook: Any = None
        task = self.config.task
        dump_tasks = dump_task_names(self.framework.name)  # the registry's list for this framework
        if task != "grad_probe" and task not in dump_tasks:
            raise TaskNotForDebugger(
                f"PrecisionDebugger: task '{task}' is not a dump task; use one of {', '.join(dump_tasks)} or "
                f"grad_probe (run_ut has its own command: msprobe -f {self.framework.name} run_ut).")
        self._close_previous()
        if task == "grad_probe":  # gradient monitoring: monitor(...) instead of start/stop
            self.grad_probe = self._make_grad_probe()
        else:
            self.driver = self._prepare()
            if self.driver is None:
                framework = self.framework
                self.collector = DumpCollector(self.config, framework.dump_adapter(), framework.stack_capture())
                self.hooks = framework.dump_hooks(self.collector, self.config.level)
                self.driver = self._make_driver()
        DebuggerBase._active = self
        logger.info(f"msprobe PrecisionDebugger ({self.framework.name}): task={task} level={self.config.level} "
                    f"dump_path={self.config.dump_path}")

    def _close_previous(self) -> None:
        previous = DebuggerBase._active
        if previous is not None and previous is not self:
            logger.warning("msprobe: a new PrecisionDebugger replaces the previous one, which is closed.")
            previous.close()

    # -- what a framework debugger provides -------------------------------------------------
    def _make_grad_probe(self) -> GradMonitor:
        """Task grad_probe's monitor."""
        raise UnsupportedError(f"grad_probe is not available for {self.framework.name}.")

    def _prepare(self) -> Optional[LifecycleDriver]:
        """Framework setup before the collector exists; a driver returned here replaces the collector."""
        return None

    def _make_driver(self) -> Optional[LifecycleDriver]:
        """A driver of the collector's steps (the DataLoader), or None: the user calls start/stop/step."""
        return None

    def _remember(self, model: Any) -> None:
        """Keep `model` for the next windows (MindSpore: every model given; PyTorch replaces it)."""
        if not any(known is model for known in self.models):
            self.models.append(model)

    def _check_models(self) -> None:
        """Raise ConfigError when the level needs a model and none was given."""

    def _save(self, variable: Any, name: str, save_backward: bool) -> None:
        """Dump `variable` into the open window's debug.json (see `save`)."""
        raise UnsupportedError(f"save() is not available for {self.framework.name}.")

    # -- the user API -----------------------------------------------------------------------
    def start(self, model: Any = None, token_range: Optional[Sequence[int]] = None,
              rank_id: Optional[int] = None) -> None:
        """Begin dumping (installs the hooks); a no-op for steps or ranks that are filtered out, while
        config.json's dump_enable is false, for grad_probe, and while a driver runs the steps.

        token_range=[first, last] (inference): of the forwards of `model` in this window, only the first-th
        to the last-th (counted from 0, both included) are dumped. rank_id: the rank to dump as when no
        process group says it (folder rank<N>, the config's rank filter)."""
        self.token_range = _token_range(token_range)
        if rank_id is not None and (isinstance(rank_id, bool) or not isinstance(rank_id, int) or rank_id < 0):
            raise ConfigError(f"start(rank_id=...) must be an integer >= 0, got {rank_id!r}.")
        self.rank_id = rank_id
        if self.grad_probe is not None:
            return
        if self.driver is not None:
            self.driver.start()
            return
        self.begin_window(model)

    def stop(self) -> None:
        """Stop dumping: remove every hook and hand this step's files to the writer (grad_probe: stop
        monitoring)."""
        if self.grad_probe is not None:
            self.grad_probe.stop()
        elif self.driver is None:
            self.end_window()

    def forward_backward_dump_end(self) -> None:
        """Same as stop() (msprobe 1.2.1's name)."""
        self.stop()

    def step(self) -> None:
        """End the step: write what is left and move to the next step number; after the last configured
        step the debugger closes itself (every file written)."""
        if self.grad_probe is not None:
            return
        if self.switch is not None:
            self.switch.enabled()  # an edit made during the step is seen now (it acts at the next start)
        if self.driver is not None:
            self.driver.step()
            return
        self.next_step()
        if self.collector is not None and self.collector.all_steps_done():
            self.close()

    def close(self) -> None:
        """Remove every hook, wait until every file is written and drop what keeps this debugger alive
        (also done after the last step, and at exit)."""
        if DebuggerBase._active is self:
            DebuggerBase._active = None
        if self.grad_probe is not None:
            self.grad_probe.stop()
            return
        if self.driver is not None:
            self.driver.close()
        if self.collector is not None:
            self.end_window()
            self.models = []
            self.collector.close()

    @classmethod
    def save(cls, variable: Any, name: str, save_backward: bool = True) -> None:
        """Dump an arbitrary value (tensor or nested structure) as "{name}.{n}.debug" in debug.json; with
        save_backward the gradient of a tensor that gets one as "{name}_grad.{n}.debug". A no-op outside
        a start()..stop() window. Works as `PrecisionDebugger.save(...)` or on the instance."""
        debugger = cls.active()
        if debugger is not None and debugger.session is not None:
            debugger._save(variable, name, save_backward)

    @classmethod
    def active(cls) -> Optional["DebuggerBase"]:
        """The active debugger when it is one of this class, else None."""
        debugger = DebuggerBase._active
        return debugger if isinstance(debugger, cls) else None

    # -- the window, also driven by a DataLoader driver -------------------------------------
    def begin_window(self, model: Any = None) -> None:
        """Install the level's hooks unless the step or rank is filtered out; a model given while the
        window is open joins it."""
        collector, hooks = self.collector, self.hooks
        if collector is None or hooks is None:
            return
        if self.switch is not None and not self.switch.enabled():
            self.end_window()  # dump_enable turned false: the open window's files are written
            return
        added = model is not None and not any(known is model for known in self.models)
        if model is not None:
            self._remember(model)
        self._check_models()
        if self.session is not None:
            if added:
                hooks.add_model(self.session, model)
            return
        rank = self.rank_id if self.rank_id is not None else current_rank(self.framework)
        if collector.all_steps_done() or not collector.start(rank):
            return
        if self.token_range is not None:
            self._count_tokens(collector)
        try:
            self.session = hooks.open(self.models)
        except MsprobeError:
            collector.stop()
            raise
        except Exception as exc:  # noqa: BLE001 - rolled back; the user's step runs undumped
            collector.stop()
            collector.guard.report("PrecisionDebugger.start", exc)

    def _count_tokens(self, collector: DumpCollector) -> None:
        """Before the window's hooks (so the model's own entry sees it): a forward pre-hook on the model that turns
        collecting on for the token_range-th forwards only."""
        if not self.models or not hasattr(self.models[-1], "register_forward_pre_hook"):
            raise ConfigError("start(token_range=...) counts the forwards of the model: pass it, start(model, "
                              "token_range=[first, last]).")
        first, last = self.token_range or (0, 0)
        count = [0]
        collector.active = False  # nothing outside the counted forwards

        def on_forward(module: Any, args: Any) -> None:
            collector.active = not collector.finished and first <= count[0] <= last
            count[0] += 1
        self._token_hook = self.models[-1].register_forward_pre_hook(on_forward)

    def end_window(self) -> None:
        """Remove the window's hooks and hand its files to the writer."""
        if self._token_hook is not None:
            self._token_hook.remove()
            self._token_hook = None
        if self.session is not None:
            session, self.session = self.session, None
            session.close()
        if self.collector is not None:
            self.collector.stop()

    def next_step(self) -> None:
        """End the window and move the collector and the hooks to the next step."""
        self.end_window()
        if self.collector is not None and self.hooks is not None:
            self.collector.next_step()
            self.hooks.new_step()


def _token_range(value: Optional[Sequence[int]]) -> Optional[Tuple[int, int]]:
    """start(token_range=[first, last]) checked: two integers, 0 <= first <= last."""
    if value is None:
        return None
    if (not isinstance(value, (list, tuple)) or len(value) != 2
            or any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in value) or value[0] > value[1]):
        raise ConfigError(f"start(token_range=...) must be [first, last], integers with 0 <= first <= last, got "
                          f"{value!r}.")
    return value[0], value[1]
