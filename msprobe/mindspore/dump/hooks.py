"""Every PyNative hook of one MindSpore debugger, installed for one start()..stop() window.

`MindSporeHooks.open(models)` returns a `MindSporeWindow` whose `HookSession` holds the API wrappers (mint / ops / Tensor /
functional / collectives), the primitive `__call__` patches, the Cell and parameter hooks and the jit
patch; closing it leaves MindSpore exactly as it was. A failing install undoes the ones before it.
Installing again each step is cheap: 3-4 ms at level mix on the GPT model of
benchmarks/ms_dump_overhead.py (1,195 API wrappers, built once and kept while detached, plus the hooks
of 32 cells), against 0.7-0.8 s per training step::

    hooks = MindSporeHooks(collector, level="mix")
    window = hooks.open([model])       # start(): records from now on
    ...
    window.close()                     # stop(): pending records flushed, every hook removed
    hooks.new_step()                   # step()

This is the `DumpHooks` of msprobe/core/framework.py; the core debugger base drives it.
"""
from msprobe.core.dump.session import HookSession, fewer_collections
from msprobe.core.log import logger
from msprobe.mindspore.dump.api_hooks import HookContext, JitPatcher, PrimitivePatcher
from msprobe.mindspore.dump.cell_hooks import CellHooks

__all__ = ["MindSporeHooks", "MindSporeWindow"]


class MindSporeWindow:
    """The hooks of one start()..stop() window: `close()` ends recording, then removes every hook."""

    def __init__(self, context, session):
        self.context, self.session = context, session

    def close(self):
        context = self.context
        context.flush()
        context.enabled = False
        self.session.close()


class MindSporeHooks:
    """The hook installers of one collector and dump level ("L0", "L1", "mix")."""

    def __init__(self, collector, level):
        self.level = level
        self.context = HookContext(collector)
        self.cells = CellHooks(self.context)
        self.primitives = PrimitivePatcher(self.context)
        self.jit = JitPatcher(self.context)
        self.uses_api_hooks = level in ("L1", "mix")
        self.uses_cell_hooks = level in ("L0", "mix")

    def open(self, models):
        """A new window with every hook of this level installed (for `models`' cells and primitives)."""
        if self.uses_cell_hooks and not models:
            logger.warning(f"msprobe: level {self.level} dumps Cells only when start(model) gets the model.")
        session = HookSession()
        with session.installing():
            fewer_collections(session)  # the step's records would otherwise set off full collections
            if self.uses_api_hooks:
                self.context.apis.install()
                session.callback(self.context.apis.remove)
            for model in models:
                self._install_model(session, model)
            if self.uses_api_hooks:
                self.jit.install(session)
        self.context.enabled = True
        return MindSporeWindow(self.context, session)

    def add_model(self, window, model):
        """Hook one more model into an open window (a second start(model) in the same step)."""
        self._install_model(window.session, model)

    def _install_model(self, session, model):
        with session.installing():
            if self.uses_api_hooks:
                self.primitives.install(session, model)
            if self.uses_cell_hooks:
                self.cells.install(session, model)

    def new_step(self):
        """The debugger moved to the next step: Cell call counters start again."""
        self.cells.new_step()
