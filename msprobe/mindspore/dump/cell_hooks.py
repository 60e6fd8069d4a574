"""L0 hooks: every sub-Cell of a model as `Cell.{path}.{Class}.forward.N`, its backward and its
parameter gradients (`Cell.{path}.{Class}.parameters_grad`).

Hooks are registered once per model with MindSpore's own Cell hook API and every handle is kept,
so `remove()` leaves the cells as they were. Backward entries are paired with forward calls in
reverse order (backward runs the calls of a cell last-first).
"""
__all__ = ["CellHooks"]


class CellHooks:
    """Installs forward-pre / forward / backward hooks on cells and hooks on their parameters."""

    def __init__(self, context):
        self.context = context          # api_hooks.HookContext: collector + re-entrancy depth
        self.handles = []
        self.models = set()
        self._open = {}                 # id(cell) -> forward calls not finished yet
        self._done = {}                 # id(cell) -> dumped forward calls awaiting backward

    def install(self, model):
        if id(model) in self.models:
            return
        self.models.add(id(model))
        for path, cell in model.cells_and_names():
            if not path:  # the root is the model itself; the reference names only sub-cells
                continue
            key = f"Cell.{path}.{type(cell).__name__}"
            self.handles.append(cell.register_forward_pre_hook(self._pre_hook(key), with_kwargs=True))
            self.handles.append(cell.register_forward_hook(self._post_hook(key)))
            self.handles.append(cell.register_backward_hook(self._backward_hook()))
            for param_name, param in cell.parameters_and_names(expand=False):
                if param.requires_grad:
                    self.handles.append(param.register_hook(self._param_hook(key, param_name)))

    def remove(self):
        for handle in self.handles:
            handle.remove()
        self.handles = []
        self.models.clear()
        self._open.clear()
        self._done.clear()

    def new_step(self):
        self._open.clear()
        self._done.clear()

    # -- hooks ------------------------------------------------------------------------------
    def _active(self):
        ctx = self.context
        return ctx.enabled and ctx.collector.active

    def _pre_hook(self, key):
        def hook(cell, args, kwargs):
            if not self._active():
                return None
            ctx = self.context
            ctx.depth += 1
            try:
                call = ctx.guarded(key, ctx.collector.begin_forward, key, args, kwargs, True)
            finally:
                ctx.depth -= 1
            if call is not None:
                self._open.setdefault(id(cell), []).append(call)
            return None
        return hook

    def _post_hook(self, key):
        def hook(cell, args, output):
            calls = self._open.get(id(cell))
            if not calls:
                return None
            call = calls.pop()
            ctx = self.context
            ctx.depth += 1
            try:
                params = {name: p for name, p in cell.parameters_and_names(expand=False)}
                ctx.guarded(key, ctx.collector.end_forward, call, output, params or None)
            finally:
                ctx.depth -= 1
            if call.dump:
                self._done.setdefault(id(cell), []).append(call)
            return None
        return hook

    def _backward_hook(self):
        def hook(cell, grad_input, grad_output):
            calls = self._done.get(id(cell))
            if not calls:
                return None
            call = calls.pop()
            ctx = self.context
            ctx.depth += 1
            try:
                ctx.guarded(call.backward_name, ctx.collector.backward, call, _as_list(grad_output),
                            _as_list(grad_input))
            finally:
                ctx.depth -= 1
            return None
        return hook

    def _param_hook(self, key, param_name):
        def hook(grad):
            if not self._active():
                return None
            ctx = self.context
            ctx.depth += 1
            try:
                ctx.guarded(key, ctx.collector.parameters_grad, key, param_name, grad)
            finally:
                ctx.depth -= 1
            return None
        return hook


def _as_list(grads):
    if grads is None:
        return []
    return list(grads) if isinstance(grads, (tuple, list)) else [grads]
