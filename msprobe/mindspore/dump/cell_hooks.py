"""L0 hooks: every sub-Cell of a model as `Cell.{path}.{Class}.forward.N`, its backward and its
parameter gradients (`Cell.{path}.{Class}.parameters_grad`).

Forward hooks are registered with MindSpore's own Cell hook API into the debugger's `HookSession`, so
closing it leaves the cells as they were: the handles are removed, and the state MindSpore creates
on a first registration (the hook dicts) is put back when nothing else was registered meanwhile.
The backward is observed with tensor hooks on the inputs and outputs of each call (see grad_capture),
not with `Cell.register_backward_hook`: that one inserts `CellBackwardHook` nodes in front of the
cell, which reorder MindSpore's gradient sums and change the training's bits.
"""
from msprobe.mindspore.dump.grad_capture import GradGather, grad_enabled, is_float_tensor

__all__ = ["CellHooks"]

# created lazily by MindSpore on the first registration of each kind; None before
_LAZY_HOOK_DICTS = ("_lazy_forward_pre_hook", "_lazy_forward_hook", "_lazy_backward_pre_hook",
                    "_lazy_backward_hook", "_lazy_forward_pre_hook_with_kwargs", "_lazy_forward_hook_with_kwargs",
                    "_lazy_forward_hook_always_called")
_BACKWARD_PRIM = "_cell_backward_hook"


def _cell_state(cell):
    """What a first hook registration changes in `cell`, as it is now."""
    own = vars(cell)
    primitives = own.get("_primitives") or {}
    return ({name: own[name] for name in _LAZY_HOOK_DICTS if name in own},
            own.get(_BACKWARD_PRIM), _BACKWARD_PRIM in primitives)


def _restore_cell(cell, state):
    """Undo what registering our hooks created, where the user did not register hooks meanwhile."""
    lazy, backward_prim, prim_listed = state
    own = vars(cell)
    for name, value in lazy.items():
        if value is None and not own.get(name):
            object.__setattr__(cell, name, None)
    if backward_prim is None and not own.get("_lazy_backward_hook") and _BACKWARD_PRIM in own:
        object.__setattr__(cell, _BACKWARD_PRIM, None)
        if not prim_listed:
            (own.get("_primitives") or {}).pop(_BACKWARD_PRIM, None)


class CellHooks:
    """Installs forward-pre / forward / backward hooks on cells and hooks on their parameters."""

    def __init__(self, context):
        self.context = context          # api_hooks.HookContext: collector + re-entrancy guard
        self.models = set()             # ids of the models hooked in the open session
        self._open = {}                 # id(cell) -> (forward call, its GradGather or None) not finished yet

    def install(self, session, model):
        """Hook every sub-cell of `model`; every handle and state change is undone by the session."""
        if id(model) in self.models:
            return
        if not self.models:
            session.callback(self._forget)
        self.models.add(id(model))
        for path, cell in model.cells_and_names():
            if not path:  # the root is the model itself; the reference names only sub-cells
                continue
            key = f"Cell.{path}.{type(cell).__name__}"
            session.callback(_restore_cell, cell, _cell_state(cell))  # runs after the handles are removed
            session.add_handle(cell.register_forward_pre_hook(self._pre_hook(key), with_kwargs=True))
            session.add_handle(cell.register_forward_hook(self._post_hook(key)))
            for param_name, param in cell.parameters_and_names(expand=False):
                if param.requires_grad:
                    session.add_handle(param.register_hook(self._param_hook(key, param_name)))

    def _forget(self):
        self.models.clear()
        self.new_step()

    def new_step(self):
        self._open.clear()

    # -- hooks ------------------------------------------------------------------------------
    def _active(self):
        ctx = self.context
        return ctx.enabled and ctx.collector.active

    def _pre_hook(self, key):
        def hook(cell, args, kwargs):
            if self._active():
                call = self.context.inside(key, self.context.collector.begin_forward, key, args, kwargs, True)
                if call is not None:
                    gather = None
                    if call.dump and grad_enabled():
                        gather = self.context.inside(key, self._watch_inputs, call, args)
                    self._open.setdefault(id(cell), []).append((call, gather))
            return None
        return hook

    def _watch_inputs(self, call, args):
        context = self.context
        gather = GradGather(call, len(args), context._commit_backward, context.pending)
        for index, arg in enumerate(args):
            if is_float_tensor(arg, context.tensor_type):
                gather.watch_input(arg, index)
        return gather

    def _post_hook(self, key):
        def hook(cell, args, output):
            calls = self._open.get(id(cell))
            if calls:
                call, gather = calls.pop()
                self.context.inside(key, self._end_forward, cell, call, gather, output)
            return None
        return hook

    def _end_forward(self, cell, call, gather, output):
        params = {name: p for name, p in cell.parameters_and_names(expand=False)}
        self.context.collector.end_forward(call, output, params or None)
        if gather is not None and not gather.watch_outputs(output, self.context.tensor_type):
            gather.close()

    def _param_hook(self, key, param_name):
        def hook(grad):
            if self._active():
                self.context.inside(key, self.context.collector.parameters_grad, key, param_name, grad)
            return None
        return hook

