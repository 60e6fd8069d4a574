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

The lifecycle (start/stop/step/close/save/collect, one active debugger, the task list) is core's
DebuggerBase (msprobe/core/debugger_base.py); this class adds what is MindSpore's own: the L2 graph
dump and save()'s gradient hook.
"""

from msprobe.core.debugger_base import DebuggerBase
from msprobe.core.errors import UnsupportedError
from msprobe.core.paths import make_dir

__all__ = ["PrecisionDebugger"]

_GRAPH_TASKS = ("statistics", "tensor", "overflow_check")  # what MindSpore's native kernel dump can do


class PrecisionDebugger(DebuggerBase):
    """Same arguments as the reference: config_path, then overrides of task/dump_path/level/step."""

    framework_name = "mindspore"

    # -- what is MindSpore's own ----------------------------------------------------------------
    def _make_grad_probe(self):
        from msprobe.mindspore.monitor.grad_probe import GradProbe

        return GradProbe(self.config)

    def _prepare(self):
        make_dir(self.config.dump_path, what="dump_path")
        if self.config.level == "L2" or _graph_mode():
            return self._graph_dump()
        return None

    def _graph_dump(self):
        from msprobe.mindspore.dump.graph_dump import GraphDump

        config = self.config
        if config.level != "L2":
            raise UnsupportedError(f"level '{config.level}' needs PyNative mode; in graph mode "
                                   "(GRAPH_MODE or a whole-network jit) only level 'L2' (kernel dump) works. "
                                   "Set \"level\": \"L2\" or run the network in PYNATIVE_MODE.")
        if config.task not in _GRAPH_TASKS:
            raise UnsupportedError(f"task '{config.task}' needs PyNative mode (levels L0, L1, mix); the L2 kernel "
                                   f"dump does {', '.join(_GRAPH_TASKS)}.")
        return GraphDump(config)

    @property
    def _graph(self):
        """The L2 native graph dump, when it drives this debugger."""
        return self.driver if self.collector is None else None

    @property
    def _hooks(self):
        return self.hooks

    def monitor(self, optimizer):
        """task grad_probe: record gradient summaries of the optimizer's parameters before each of its
        steps (PyNative); see docs/grad_probe.md."""
        if self.grad_probe is None:
            raise UnsupportedError(f"monitor() belongs to task 'grad_probe'; this debugger's task is "
                                   f"'{self.config.task}' (use start()/stop()/step()).")
        self.grad_probe.monitor(optimizer)

    def _save(self, variable, name, save_backward):
        """Under ms.grad / value_and_grad the gradient of a floating tensor is saved as `{name}_grad.{i}.debug`."""
        context, collector = self.hooks.context, self.collector
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


def _graph_mode():
    import mindspore as ms
    return ms.get_context("mode") == ms.GRAPH_MODE
