"""Module-level (L0 / mix) dump: forward pre/post hooks per submodule, parameter-grad hooks.

Each submodule `path` of class `Cls` is recorded as "Module.{path}.{Cls}.forward.{n}" with its
own parameters, its backward as "Module.{path}.{Cls}.backward.{n}" (through GradTracker, no
full backward hooks: those wrap outputs in a custom Function and break in-place ops on them), and
the gradients of its parameters as "Module.{path}.{Cls}.parameters_grad". Every hook is kept as
a RemovableHandle registered in the session's HookSession, which removes it at stop().
Under torch.compile the names are the eager ones (no `_orig_mod.`), the OptimizedModule wrapper
itself is no entry, and with `outside_dynamo` every hook is kept out of Dynamo's trace (see
dump/compiled.py).
"""
import sys

import torch

from msprobe.pytorch.dump.compiled import eager_name, is_optimized

__all__ = ["ModuleHooks"]


class ModuleHooks:
    """Installs the hooks on `models` (a module or a list of modules)."""

    def __init__(self, collector, tracker, pause, track_grads=True, only=None, outside_dynamo=False):
        self.collector = collector
        self.tracker = tracker
        self.pause = pause
        self.track_grads = track_grads
        self.session = None
        self.calls = {}
        self.only = only  # module_dump: the single module allowed to record
        # compiled regions: Dynamo calls the hooks (graph break) instead of tracing them
        self.wrap = _outside_dynamo if outside_dynamo else (lambda hook: hook)

    def install(self, models, session, root_name=None):
        """Hook every submodule of `models` (only `models` itself as `root_name` when given); the
        handles go to `session` (a core HookSession)."""
        self.session = session
        session.callback(self.calls.clear)
        models = models if isinstance(models, (list, tuple)) else [models]
        for model_index, model in enumerate(models):
            for path, module in model.named_modules():
                if is_optimized(module):
                    continue  # a torch.compile wrapper: its _orig_mod is the module
                path = eager_name(path)
                if root_name is not None:
                    if module is not model:
                        continue
                    path = root_name
                elif not path:
                    continue  # the root model itself is not a dump entry (as in the reference)
                if len(models) > 1 and root_name is None:
                    path = f"{model_index}.{path}"
                self._hook(module, f"Module.{path}.{type(module).__name__}")
        return self

    def _hook(self, module, key):
        add = self.session.add_handle
        wrap = self.wrap
        add(module.register_forward_pre_hook(wrap(self._pre_hook(key)), with_kwargs=True))
        # always_call: a forward that raises still closes its call (module stack, scope ranges)
        add(module.register_forward_hook(wrap(self._post_hook(key)), with_kwargs=True, always_call=True))
        for name, param in module.named_parameters(recurse=False):
            if param.requires_grad:
                add(param.register_post_accumulate_grad_hook(wrap(self._param_hook(key, name))))

    def _pre_hook(self, key):
        def pre_hook(module, args, kwargs):
            collector = self.collector
            if not collector.active or (self.only is not None and module is not self.only):
                return None
            call = None
            try:  # a dump failure must not reach the user's code (see core/dump/guard.py)
                with self.pause():
                    call = collector.begin_forward(key, args, kwargs, is_module=True)
                    pending = None
                    if call.dump and self.track_grads and torch.is_grad_enabled():
                        pending = self.tracker.begin(call, args, kwargs)
            except Exception as exc:  # noqa: BLE001
                if call is not None:
                    collector.abandon_forward(call)  # keep the module stack right
                collector.guard.report(key, exc)
                return None
            # the exception being handled around this call, if any (to tell it from one raised inside)
            self.calls.setdefault(id(module), []).append((call, pending, sys.exc_info()[1]))
            return None
        return pre_hook

    def _post_hook(self, key):
        def post_hook(module, args, kwargs, output):
            stack = self.calls.get(id(module))
            if not stack:
                return None
            call, pending, outer_exception = stack.pop()
            current = sys.exc_info()[1]
            if current is not None and current is not outer_exception:  # forward raised: close, record nothing
                self.collector.abandon_forward(call)
                return None
            given_back = None
            try:
                with self.pause():
                    params = dict(module.named_parameters(recurse=False))
                    replaced = self.collector.end_forward(call, output, parameters=params)
                    if replaced is not None and replaced is not output:  # a task replaced the output
                        output = given_back = replaced
                    if pending is not None:
                        self.tracker.watch_outputs(pending, output)
            except Exception as exc:  # noqa: BLE001
                self.collector.guard.report(key, exc)
            return given_back
        return post_hook

    def _param_hook(self, key, name):
        def on_grad(param):
            if param.grad is not None and self.collector.active:
                with self.pause():
                    self.collector.guard.call(key, self.collector.parameters_grad, key, name, param.grad)
        return on_grad


def _outside_dynamo(hook):
    hook = torch._dynamo.disable(hook)
    hook._msprobe_hook = True  # shadow_compiled takes these off a region's modules (dump/compiled.py)
    return hook
