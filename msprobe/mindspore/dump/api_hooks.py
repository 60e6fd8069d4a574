"""L1 hooks: mint / ops / Tensor / comm_func calls, primitives owned by cells, and @jit functions.

All of them report to one `HookContext`, which holds the collector and the re-entrancy guard:
a call made while another dumped call (or msprobe itself) is running is not recorded, so
`Tensor.__add__` implemented with `ops.add`, or the statistics code, never appear as extra calls.
Every piece of our bookkeeping runs through the collector's `DumpGuard`: a failure is logged once
and the user's call goes on undumped. The patchers install into a `HookSession` (see hooks.py).
"""
from msprobe.core.dump.session import Reentrancy
from msprobe.core.naming import is_inplace
from msprobe.mindspore.dump.api_registry import ApiPatcher
from msprobe.mindspore.dump.grad_capture import (CallReplay, GradGather, flush_pending, grad_enabled,
                                                  is_random_api)

__all__ = ["HookContext", "PrimitivePatcher", "JitPatcher"]


def _has_tensor(value, tensor_type):
    if isinstance(value, (tuple, list)):
        return any(_has_tensor(v, tensor_type) for v in value)
    return isinstance(value, tensor_type)


def _collective_output(result, args, tensor_type):
    """What a collective produced: its result, or for in-place ones (None / a work handle) the
    first argument that holds tensors, now overwritten."""
    if _has_tensor(result, tensor_type):
        return result
    return next((a for a in args if _has_tensor(a, tensor_type)), result)


class HookContext:
    """Shared state of the PyNative hooks of one debugger."""

    def __init__(self, collector):
        import mindspore
        self.collector = collector
        self.tensor_type = mindspore.Tensor
        self.guard = Reentrancy()   # our own work inside a hook is never recorded
        self.enabled = False        # between start() and stop()
        self.pending = []           # open GradGathers
        self.apis = ApiPatcher(self.api_call)

    def recording(self):
        return self.enabled and not self.guard.active and self.collector.active

    def guarded(self, key, fn, *args):
        """fn(*args), or None after the collector's guard logged the failure: the user's call goes on."""
        return self.collector.guard.call(key, fn, *args)

    def inside(self, key, fn, *args):
        """`guarded`, with every call fn makes left unrecorded."""
        with self.guard.inside():
            return self.collector.guard.call(key, fn, *args)

    # -- generic call -----------------------------------------------------------------------
    def run_call(self, key, original, args, kwargs, inplace=False, backward=True, collective=False):
        """Run `original(*args, **kwargs)` as the dumped call `key` ("Mint.add").

        collective: a communication call; no backward capture (its inputs must stay the user's own
        tensors), and when it returns no tensor (mint.distributed works in place) its first tensor
        argument, read after the call, is recorded as the output."""
        if not self.recording():
            return original(*args, **kwargs)
        collector = self.collector
        with self.guard.inside():  # stays raised during the call: inner calls are not recorded
            call = self.guarded(key, collector.begin_forward, key, args, kwargs)
            if call is None:
                return original(*args, **kwargs)
            call.function = original  # for tasks that run the call again (free_benchmark)
            gather = None
            if call.dump and backward and not inplace and not collective and grad_enabled():
                gather = self.guarded(key, self._gather, call, original, args, kwargs)
            output = original(*args, **kwargs)
            if collective:
                self.guarded(key, self._end_collective, call, output, args)
            else:
                replaced = self.guarded(key, collector.end_forward, call, output)
                if replaced is not None:  # a task may replace the output (free_benchmark fix)
                    output = replaced
            if gather is not None:
                self.guarded(key, self._watch_outputs, gather, output)
            return output

    def _end_collective(self, call, output, args):
        self.collector.end_forward(call, _collective_output(output, args, self.tensor_type))

    def api_call(self, prefix, api, original, args, kwargs):
        """Entry point of every wrapped API (see api_registry)."""
        if not self.enabled or self.guard.active:
            return original(*args, **kwargs)
        return self.run_call(f"{prefix}.{api}", original, args, kwargs, inplace=is_inplace(api),
                             collective=prefix == "Distributed")

    def _commit_backward(self, call, grads_of_outputs, grads_of_inputs, replay=None, outputs=()):
        self.inside(call.backward_name, self._backward, call, grads_of_outputs, grads_of_inputs, replay, outputs)

    def _backward(self, call, grads_of_outputs, grads_of_inputs, replay, outputs):
        if replay is not None and self.collector.want_backward_output:
            grads_of_inputs = replay.input_grads(outputs, grads_of_outputs)
        self.collector.backward(call, grads_of_outputs, grads_of_inputs)

    def _gather(self, call, original, args, kwargs):
        """The backward capture of one API call: output hooks, input gradients by replay (none for
        random APIs: a replay would draw other random numbers)."""
        replay = None if is_random_api(call.key) else CallReplay(original, args, kwargs, self.tensor_type)
        return GradGather(call, len(args), self._commit_backward, self.pending, replay)

    def _watch_outputs(self, gather, output):
        if not gather.watch_outputs(output, self.tensor_type):
            gather.close()  # no differentiable output (Shape, argmax...): no backward entry

    def flush(self):
        """Commit backward entries whose hooks did not all fire (called before stop/step)."""
        self.inside("backward", flush_pending, self.pending)


class PrimitivePatcher:
    """Dumps primitives held by the cells of a model as `Primitive.{attr}.{Class}.N.forward`.

    Python looks `__call__` up on the class, so the class method is wrapped; calls of primitives
    that were not registered pass straight through after one dictionary lookup.
    """

    def __init__(self, context):
        self.context = context
        self.names = {}     # id(primitive) -> dump key, for the open session
        self.keep = []      # the primitives themselves, so their ids stay unique
        self.patched = set()

    def _register_model(self, model):
        from mindspore.ops import Primitive
        classes = set()
        for _, cell in model.cells_and_names():
            prims = getattr(cell, "_primitives", None) or {}
            for attr, prim in list(prims.items()):
                # "_"-prefixed primitives are MindSpore's own machinery (e.g. _cell_backward_hook)
                if isinstance(prim, Primitive) and not attr.startswith("_") and id(prim) not in self.names:
                    self.names[id(prim)] = f"Primitive.{attr}.{type(prim).__name__}"
                    self.keep.append(prim)
                    classes.add(type(prim))
        return classes

    def install(self, session, model):
        if not self.patched:
            session.callback(self._forget)
        for cls in self._register_model(model) - self.patched:
            self.patched.add(cls)
            session.patch(cls, "__call__", self._wrapper(cls.__call__))

    def _forget(self):
        self.names.clear()
        self.keep = []
        self.patched = set()

    def _wrapper(self, original):
        names, context = self.names, self.context

        def __call__(prim, *args, **kwargs):
            key = names.get(id(prim))
            if key is None or not context.enabled or context.guard.active:
                return original(prim, *args, **kwargs)
            return context.run_call(key, lambda *a, **k: original(prim, *a, **k), args, kwargs)
        return __call__


def _jit_executor():
    from mindspore.common import api as ms_api
    return getattr(ms_api, "_JitExecutor", None) or getattr(ms_api, "_MindsporeFunctionExecutor", None)


def _jit_name(jit_self):
    owner = getattr(jit_self, "obj", None)
    # a jit Cell.construct is named by its class, like the reference ("Jit.AlexNet")
    return type(owner).__name__ if owner is not None else getattr(jit_self.fn, "__name__", "function")


class JitPatcher:
    """Records functions decorated with @mindspore.jit, called in PyNative, as `Jit.{fn}.N.forward`
    (and `.backward` under a gradient transform, like any API call).

    The API wrappers are taken off while the function compiles and runs: the graph compiler
    parses the Python source of what it calls and must see the real MindSpore functions.
    """

    def __init__(self, context):
        self.context = context

    def install(self, session):
        executor = _jit_executor()
        if executor is not None:
            session.patch(executor, "__call__", self._wrapper(executor.__call__))

    def _wrapper(self, original):
        context = self.context

        def __call__(jit_self, *args, **kwargs):
            if not context.enabled or context.guard.active:
                return original(jit_self, *args, **kwargs)
            name = context.guarded("Jit", _jit_name, jit_self)
            if name is None:
                return original(jit_self, *args, **kwargs)
            bound = args[:1] if getattr(jit_self, "obj", None) is not None else ()  # the Cell of a jit construct
            user_args = args[len(bound):]

            def run(*call_args, **call_kwargs):
                reinstall = context.apis.installed
                context.apis.remove()
                try:
                    return original(jit_self, *bound, *call_args, **call_kwargs)
                finally:
                    if reinstall:
                        context.apis.install()
            return context.run_call(f"Jit.{name}", run, user_args, kwargs)
        return __call__
