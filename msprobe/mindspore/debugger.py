"""`msprobe.mindspore.PrecisionDebugger`: config.json-driven data dump for MindSpore.

PyNative, levels L0 (Cells), L1 (APIs, primitives of the model, @jit functions) and mix::

    debugger = PrecisionDebugger(config_path="./config.json")
    for data, label in loader:
        debugger.start(model)      # model is needed for L0 / mix / primitives
        loss, grads = grad_fn(data, label)
        optimizer(grads)
        debugger.stop()
        debugger.step()

Level L2 (static graph or jit kernels) drives MindSpore's native dump instead: call `start()`
once before the network is built (see graph_dump.py).
"""

from msprobe.core.config import load_config
from msprobe.core.errors import ConfigError, UnsupportedError
from msprobe.core.log import logger
from msprobe.core.paths import make_dir

__all__ = ["PrecisionDebugger"]

_DUMP_TASKS = ("statistics", "tensor", "overflow_check")


class PrecisionDebugger:
    """Same arguments as the reference: config_path, then overrides of task/dump_path/level/step."""

    _instance = None

    def __init__(self, config_path=None, task=None, dump_path=None, level=None, step=None):
        self.config = load_config(config_path, task=task, dump_path=dump_path, level=level, step=step)
        if self.config.task not in _DUMP_TASKS:
            raise ConfigError(f"task '{self.config.task}' is not a dump task; PrecisionDebugger supports "
                              f"{', '.join(_DUMP_TASKS)} (run_ut has its own command: msprobe -f mindspore run_ut).")
        make_dir(self.config.dump_path, what="dump_path")
        previous = PrecisionDebugger._instance
        if previous is not None:  # one active debugger: two sets of wrappers would undo each other
            logger.warning("msprobe: a new PrecisionDebugger replaces the previous one, which is closed.")
            previous.close()
        self._graph = None
        self._context = None
        if self.config.level == "L2" or _graph_mode():
            self._init_graph_dump()
        else:
            self._init_pynative()
        PrecisionDebugger._instance = self

    # -- setup ------------------------------------------------------------------------------
    def _init_pynative(self):
        from msprobe.core.dump import DumpCollector
        from msprobe.mindspore.dump.adapter import get_adapter
        from msprobe.mindspore.dump.api_hooks import HookContext, JitPatcher, PrimitivePatcher
        from msprobe.mindspore.dump.cell_hooks import CellHooks

        self.collector = DumpCollector(self.config, get_adapter())
        self._context = HookContext(self.collector)
        self._cells = CellHooks(self._context)
        self._primitives = PrimitivePatcher(self._context)
        self._jit = JitPatcher(self._context)

    def _init_graph_dump(self):
        from msprobe.mindspore.dump.graph_dump import GraphDump
        if self.config.level != "L2":
            raise UnsupportedError(f"level '{self.config.level}' needs PyNative mode; in graph mode "
                                   "(GRAPH_MODE or a whole-network jit) only level 'L2' (kernel dump) works. "
                                   "Set \"level\": \"L2\" or run the network in PYNATIVE_MODE.")
        self._graph = GraphDump(self.config)

    @property
    def uses_api_hooks(self):
        return self.config.level in ("L1", "mix")

    @property
    def uses_cell_hooks(self):
        return self.config.level in ("L0", "mix")

    # -- public API -------------------------------------------------------------------------
    def start(self, model=None):
        """Begin collecting. PyNative: call every step; `model` enables L0/mix cells and primitives."""
        if self._graph is not None:
            self._graph.start()
            return
        collector, context = self.collector, self._context
        if collector.all_steps_done():
            self._uninstall_all()
            return
        from msprobe.mindspore.dump.adapter import current_rank
        if not collector.start(current_rank()):
            return
        if self.uses_cell_hooks and model is None:
            logger.warning(f"msprobe: level {self.config.level} dumps Cells only when start(model) gets the model.")
        if model is not None:
            if self.uses_cell_hooks:
                self._cells.install(model)
            if self.uses_api_hooks:
                self._primitives.install(model)
        if self.uses_api_hooks:
            context.install_apis()
            self._jit.install()
        context.enabled = True

    def stop(self):
        """Stop collecting and write this step's JSON files (hooks on tensors stay harmless)."""
        if self._graph is not None:
            return
        context = self._context
        if context.enabled:
            context.flush()
        context.enabled = False
        context.remove_apis()
        self._jit.remove()
        self.collector.stop()

    forward_backward_dump_end = stop

    def step(self):
        """End the step: write what is left and move to the next step number."""
        if self._graph is not None:
            self._graph.step()
            return
        if self._context.enabled:
            self.stop()
        self._context.flush()
        self.collector.next_step()
        self._cells.new_step()
        if self.collector.all_steps_done():
            self.close()

    @classmethod
    def save(cls, variable, name, save_backward=True):
        """Dump an arbitrary value (tensor, nested list/dict) as `{name}.{i}.debug` in debug.json; with
        save_backward, under ms.grad / value_and_grad, the gradient of a floating tensor as
        `{name}_grad.{i}.debug`. Works as `PrecisionDebugger.save(...)` or on the instance."""
        debugger = cls._instance
        if debugger is None or debugger._graph is not None or not debugger._context.enabled:
            return
        context, collector = debugger._context, debugger.collector
        context.depth += 1
        try:
            index = collector.save_variable(name, variable)
        finally:
            context.depth -= 1
        if index is None or not save_backward:
            return
        from msprobe.mindspore.dump.grad_capture import grad_enabled, is_float_tensor
        if not is_float_tensor(variable, context.tensor_type) or not grad_enabled():
            return

        def on_grad(grad):
            context.depth += 1
            try:
                context.guarded(f"{name}_grad", collector.save_variable, f"{name}_grad", grad, index)
            finally:
                context.depth -= 1
            return None
        variable.register_hook(on_grad)

    def close(self):
        """Remove every hook and wait for files to be written (also done after the last step)."""
        if PrecisionDebugger._instance is self:
            PrecisionDebugger._instance = None
        if self._graph is not None:
            self._graph.close()
            return
        self.stop()
        self._uninstall_all()
        self.collector.close()

    def _uninstall_all(self):
        self._context.enabled = False
        self._context.remove_apis()
        self._jit.remove()
        self._primitives.remove()
        self._cells.remove()


def _graph_mode():
    import mindspore as ms
    return ms.get_context("mode") == ms.GRAPH_MODE
