"""Every PyNative hook of one MindSpore debugger, installed for one start()..stop() window.

`MindSporeHooks.open(models)` returns a `HookSession` holding the API wrappers (mint / ops / Tensor /
functional / collectives), the primitive `__call__` patches, the Cell and parameter hooks and the jit
patch; closing it leaves MindSpore exactly as it was. A failing install undoes the ones before it.
Installing again each step is cheap: 3-4 ms at level mix on the GPT model of
benchmarks/ms_dump_overhead.py (1,195 API wrappers, built once and kept while detached, plus the hooks
of 32 cells), against 0.7-0.8 s per training step::

    hooks = MindSporeHooks(collector, level="mix")
    session = hooks.open([model])      # start()
    ...
    session.close()                    # stop()
"""
from msprobe.core.dump.session import HookSession
from msprobe.mindspore.dump.api_hooks import HookContext, JitPatcher, PrimitivePatcher
from msprobe.mindspore.dump.cell_hooks import CellHooks

__all__ = ["MindSporeHooks"]


class MindSporeHooks:
    """The hook installers of one collector and dump level ("L0", "L1", "mix")."""

    def __init__(self, collector, level):
        self.context = HookContext(collector)
        self.cells = CellHooks(self.context)
        self.primitives = PrimitivePatcher(self.context)
        self.jit = JitPatcher(self.context)
        self.uses_api_hooks = level in ("L1", "mix")
        self.uses_cell_hooks = level in ("L0", "mix")

    def open(self, models):
        """A new session with every hook of this level installed (for `models`' cells and primitives)."""
        session = HookSession()
        with session.installing():
            if self.uses_api_hooks:
                self.context.apis.install()
                session.callback(self.context.apis.remove)
            for model in models:
                self.add_model(session, model)
            if self.uses_api_hooks:
                self.jit.install(session)
        return session

    def add_model(self, session, model):
        """Hook one more model into an open session (a second start(model) in the same step)."""
        with session.installing():
            if self.uses_api_hooks:
                self.primitives.install(session, model)
            if self.uses_cell_hooks:
                self.cells.install(session, model)
