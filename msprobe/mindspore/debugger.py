"""`msprobe.mindspore.PrecisionDebugger`: config.json-driven data dump for MindSpore.

PyNative, levels L0 (Cells), L1 (APIs, primitives of the model, @jit functions) and mix::

    debugger = PrecisionDebugger(config_path="./config.json")
    for data, label in loader:
        debugger.start(model)      # model is needed for L0 / mix / primitives
        loss, grads = grad_fn(data, label)
        optimizer(grads)
        debugger.stop()
        debugger.step()

or, with the same effect, `with debugger.collect(model): ...` around the step, then `debugger.step()`.
stop() takes every hook off again (APIs, Cell hooks, primitive patches, jit): between steps
MindSpore runs exactly as without msprobe.

Level L2 (static graph or jit kernels) drives MindSpore's native dump instead: call `start()`
once before the network is built (see graph_dump.py).
"""

from msprobe.core.config import load_config
from msprobe.core.errors import ConfigError, UnsupportedError
from msprobe.core.dump.session import CollectWindow
from msprobe.core.log import logger
from msprobe.core.paths import make_dir

__all__ = ["PrecisionDebugger"]

_DUMP_TASKS = ("statistics", "tensor", "overflow_check", "free_benchmark")


class PrecisionDebugger(CollectWindow):
    """Same arguments as the reference: config_path, then overrides of task/dump_path/level/step."""

    _instance = None

    def __init__(self, config_path=None, task=None, dump_path=None, level=None, step=None):
        self.config = load_config(config_path, task=task, dump_path=dump_path, level=level, step=step)
        self.grad_probe = None
        if self.config.task == "grad_probe":  # gradient monitoring: monitor(optimizer) instead of start/stop
            from msprobe.mindspore.monitor.grad_probe import GradProbe
            self.grad_probe, self._graph = GradProbe(self.config), None
            return
        if self.config.task not in _DUMP_TASKS:
            raise ConfigError(f"task '{self.config.task}' is not a dump task; PrecisionDebugger supports "
                              f"{', '.join(_DUMP_TASKS)} (run_ut has its own command: msprobe -f mindspore run_ut).")
        make_dir(self.config.dump_path, what="dump_path")
        previous = PrecisionDebugger._instance
        if previous is not None:  # one active debugger: two sets of wrappers would undo each other
            logger.warning("msprobe: a new PrecisionDebugger replaces the previous one, which is closed.")
            previous.close()
        self._graph = None
        if self.config.level == "L2" or _graph_mode():
            self._init_graph_dump()
        else:
            self._init_pynative()
        PrecisionDebugger._instance = self

    # -- setup ------------------------------------------------------------------------------
    def _init_pynative(self):
        from msprobe.core.dump import DumpCollector
        from msprobe.mindspore.dump.adapter import get_adapter
        from msprobe.mindspore.dump.hooks import MindSporeHooks

        self.collector = DumpCollector(self.config, get_adapter())
        self._hooks = MindSporeHooks(self.collector, self.config.level)
        self._models = []       # every model given to start(): later start() calls hook them again
        self._session = None    # the hooks of the open start()..stop() window

    def _init_graph_dump(self):
        from msprobe.mindspore.dump.graph_dump import GraphDump
        if self.config.level != "L2":
            raise UnsupportedError(f"level '{self.config.level}' needs PyNative mode; in graph mode "
                                   "(GRAPH_MODE or a whole-network jit) only level 'L2' (kernel dump) works. "
                                   "Set \"level\": \"L2\" or run the network in PYNATIVE_MODE.")
        self._graph = GraphDump(self.config)

    # -- public API -------------------------------------------------------------------------
    def monitor(self, optimizer):
        """task grad_probe: record gradient summaries of the optimizer's parameters before each of its
        steps (PyNative); see docs/grad_probe.md."""
        if self.grad_probe is None:
            raise UnsupportedError(f"monitor() belongs to task 'grad_probe'; this debugger's task is "
                                   f"'{self.config.task}' (use start()/stop()/step()).")
        self.grad_probe.monitor(optimizer)

    def start(self, model=None):
        """Begin collecting: install every hook until stop(). PyNative: call every step; `model`
        (remembered for the next steps) enables L0/mix cells and the primitives of L1."""
        if self.grad_probe is not None:
            return
        if self._graph is not None:
            self._graph.start()
            return
        if self.collector.all_steps_done():
            return
        if model is not None and not any(known is model for known in self._models):
            self._models.append(model)
        if self._session is not None:  # already started: a new model joins the open window
            if model is not None:
                self._hooks.add_model(self._session, model)
            return
        from msprobe.mindspore.dump.adapter import current_rank
        if not self.collector.start(current_rank()):
            return
        if self._hooks.uses_cell_hooks and not self._models:
            logger.warning(f"msprobe: level {self.config.level} dumps Cells only when start(model) gets the model.")
        self._session = self._hooks.open(self._models)
        self._hooks.context.enabled = True

    def stop(self):
        """Stop collecting: take every hook off (MindSpore is as before start) and write this step's
        JSON files."""
        if self.grad_probe is not None:
            self.grad_probe.stop()
            return
        if self._graph is not None:
            return
        context = self._hooks.context
        context.flush()
        context.enabled = False
        if self._session is not None:
            session, self._session = self._session, None
            session.close()
        self.collector.stop()

    forward_backward_dump_end = stop


    def step(self):
        """End the step: write what is left and move to the next step number."""
        if self.grad_probe is not None:
            return
        if self._graph is not None:
            self._graph.step()
            return
        self.stop()
        self.collector.next_step()
        self._hooks.cells.new_step()
        if self.collector.all_steps_done():
            self.close()

    @classmethod
    def save(cls, variable, name, save_backward=True):
        """Dump an arbitrary value (tensor, nested list/dict) as `{name}.{i}.debug` in debug.json; with
        save_backward, under ms.grad / value_and_grad, the gradient of a floating tensor as
        `{name}_grad.{i}.debug`. Works as `PrecisionDebugger.save(...)` or on the instance."""
        debugger = cls._instance
        if debugger is None or debugger._graph is not None or not debugger._hooks.context.enabled:
            return
        context, collector = debugger._hooks.context, debugger.collector
        index = context.inside(name, collector.save_variable, name, variable)
        if index is None or not save_backward:
            return
        from msprobe.mindspore.dump.grad_capture import grad_enabled, is_float_tensor
        if not is_float_tensor(variable, context.tensor_type) or not grad_enabled():
            return

        def on_grad(grad):
            context.inside(f"{name}_grad", collector.save_variable, f"{name}_grad", grad, index)
            return None
        variable.register_hook(on_grad)

    def close(self):
        """Remove every hook, wait for files to be written and drop what keeps this debugger alive
        (also done after the last step)."""
        if self.grad_probe is not None:
            self.grad_probe.stop()
            return
        if PrecisionDebugger._instance is self:
            PrecisionDebugger._instance = None
        if self._graph is not None:
            self._graph.close()
            return
        self.stop()
        self._models = []
        self.collector.close()


def _graph_mode():
    import mindspore as ms
    return ms.get_context("mode") == ms.GRAPH_MODE
