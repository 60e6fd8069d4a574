"""Compiled regions (torch.compile) under the dump: observed at their module boundaries, run compiled.

A region is a module wrapped by `torch.compile(module)` (an OptimizedModule, whose submodules sit
under `_orig_mod.`) or compiled in place by `module.compile()`. Without care, Dynamo traces our hooks
and modes into the graph (recompiles at every step, warnings, eager fallback), or, when the region was
compiled before start(), ignores hooks added later (it does not guard on module hooks). So during a
dump window each region is rerouted:

- module names are the eager names (`eager_name` drops `_orig_mod.`), so an eager dump and a
  compiled dump pair row by row;
- L0/mix: the module hooks are wrapped in `torch._dynamo.disable`, and the region runs through its
  own compile of the original module with the user's backend (`WindowBackend`, a distinct backend
  object, hence a distinct Dynamo cache: the user's compiled graph stays as it was outside the
  window; `isolate_recompiles` keeps the frames it resumes after each break, shared code such as a
  decorator's wrapper, from counting against the recompile limit of other models). Dynamo breaks
  the graph at every hooked module boundary, so each module's recorded output is the output of
  compiled code. That compile is kept for later windows (no recompiles). The price: fusion across
  module boundaries is lost in the window, so in bf16/fp16 a dumped step may round where the
  user's fused graph would not (fp32 steps were bit-identical in our tests). Where Dynamo cannot compile
  a built-in module's call that holds a break (torch 2.11: it runs the call eagerly), each leaf module's
  forward is compiled on its own instead (`_LeafCompiled`), the glue between them eager;
- L1/L2: the TorchFunctionMode / TorchDispatchMode is taken off the stack while the region runs, so
  the region runs the user's own compiled graph, unobserved call by call; the dump says so once in
  the log and under "compiled_regions" in dump.json;
- with the task option `interpret_compiled` (L1/L2/mix): the region runs through a window compile
  whose backend (`InterpreterBackend`) runs Dynamo's graph node by node through torch.fx.Interpreter
  with the dump's modes back on the stack, so every API/ATen call inside is recorded under its eager
  name (Dynamo keeps torch.nn.functional calls and Tensor methods as graph nodes). The kernels that
  run are the eager ones: this shows what the compiled region computes, call by call, not the
  compiled kernels' rounding (compile_check answers that);
- with the task option `shadow_compiled` (L0/mix): the step runs the user's own compiled graph, with
  our module hooks taken off the region's modules while it runs (so Dynamo never traces them), and the
  module boundaries are recorded from a second, no-grad forward of the window compile on the same
  inputs (RNG state forked, buffers restored): training stays bit-identical, module backward entries
  are not recorded (parameter gradients are, from the real backward).
"""
import contextlib
import inspect
import sys
import threading
import weakref

import torch

from msprobe.core.log import logger

__all__ = ["eager_name", "is_optimized", "find_regions", "CompiledRegions", "WindowBackend", "user_backend",
           "InterpreterBackend"]

_ORIG = "_orig_mod"
# region module -> its window compile (kept across windows), one table per (interpret, leaf by leaf)
_WINDOW_COMPILES = {(interpret, leafwise): weakref.WeakKeyDictionary() for interpret in (False, True)
                    for leafwise in (False, True)}
_LOGGED = set()  # region names already announced in the log (once per process)


def eager_name(path):
    """`path` of named_modules() without the `_orig_mod` segments torch.compile inserts."""
    if _ORIG not in path:
        return path
    return ".".join(part for part in path.split(".") if part != _ORIG)


def is_optimized(module):
    """Whether `module` is torch.compile's wrapper (without importing Dynamo when nothing was compiled)."""
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")
    return eval_frame is not None and isinstance(module, eval_frame.OptimizedModule)


def find_regions(models):
    """[(eager path, module)] of the compiled regions in `models` (a module or a list)."""
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")
    if eval_frame is None:
        return []  # nothing can have been compiled
    optimized = eval_frame.OptimizedModule
    models = models if isinstance(models, (list, tuple)) else [models]
    regions = []
    for model in models:
        if not isinstance(model, torch.nn.Module) or not _holds_compiled(model, optimized):
            continue
        for path, module in model.named_modules():
            if _is_region(module, optimized):
                regions.append((eager_name(path), module))
    return regions


def _is_region(module, optimized):
    """torch.compile's wrapper (an OptimizedModule), or a module whose compile() set `_compiled_call_impl` on it."""
    return module.__dict__.get("_compiled_call_impl") is not None or isinstance(module, optimized)


def _holds_compiled(model, optimized):
    """Whether `model` holds a compiled region, without named_modules()' dotted paths (every start() asks: 35 us for a
    59-module Llama against 65-90 us with them)."""
    seen, todo = {id(model)}, [model]
    for module in todo:  # grows while it is walked
        if _is_region(module, optimized):
            return True
        for child in module.__dict__["_modules"].values():
            if child is not None and id(child) not in seen:
                seen.add(id(child))
                todo.append(child)
    return False


def user_backend(region):
    """The backend `region` was compiled with (the callable or the string torch.compile was given)."""
    if is_optimized(region):
        backend = region.dynamo_ctx.callback
    else:
        backend = region._compiled_call_impl
        backend = getattr(backend, "_torchdynamo_orig_callable", backend)
        context = getattr(region._compiled_call_impl, "_torchdynamo_inline", None)
        backend = getattr(context, "callback", backend)
    for _ in range(8):  # Dynamo wraps the backend in a few layers, each naming the one inside
        inner = getattr(backend, "_torchdynamo_orig_backend", None)
        if inner is None or inner is backend:
            break
        backend = inner
    return backend


class WindowBackend:
    """The user's backend under another identity: Dynamo keeps separate caches per backend object."""

    def __init__(self, backend):
        self.backend = backend
        self.compiler_name = getattr(backend, "compiler_name", None) or str(backend)

    def __call__(self, graph_module, example_inputs):
        return self.backend(graph_module, example_inputs)


class _Running(threading.local):
    modes = ()  # the dump modes of the region call in progress (InterpreterBackend puts them back)


_RUNNING = _Running()


class InterpreterBackend:
    """A Dynamo backend running the captured graph node by node through torch.fx.Interpreter, with
    the dump's TorchFunctionMode / TorchDispatchMode (taken off while Dynamo ran) back on the stack."""

    compiler_name = "interpreter"

    def __call__(self, graph_module, example_inputs):
        def interpreted(*args):
            with _running_modes_on():
                return torch.fx.Interpreter(graph_module).run(*args)

        return interpreted


@contextlib.contextmanager
def _running_modes_on():
    """The dump modes of the region call in progress (`_RUNNING.modes`) back on the stack."""
    with contextlib.ExitStack() as stack:
        for mode in _RUNNING.modes:
            stack.enter_context(mode)
        yield


def backend_name(backend):
    name = getattr(backend, "compiler_name", None)
    if isinstance(name, str):
        return name
    return backend if isinstance(backend, str) else getattr(backend, "__name__", type(backend).__name__)


def _isolate_recompiles():
    """torch.compile's `isolate_recompiles=True` where this torch has it (torch 2.13 has it; torch 2.11 refuses the
    keyword, and there a window compile's shared frames count against the recompile limit as any compile's do)."""
    try:
        return {"isolate_recompiles": True} if "isolate_recompiles" in inspect.signature(torch.compile).parameters else {}
    except (TypeError, ValueError):
        return {}


_ISOLATE_RECOMPILES = _isolate_recompiles()


_BREAKS_INSIDE_MODULES = None


def _breaks_inside_modules():
    """Whether this torch's Dynamo compiles the code of a built-in module whose call holds a graph break (our
    Dynamo-disabled hook). torch 2.13's does: a region compiled with our hooks on gives a graph per module. torch
    2.11's does not: it runs such a call eagerly, so a whole region would run eagerly in the dump window (not one
    graph compiled, without a word). Asked once a process, of a ReLU (built in, like the modules that matter)."""
    global _BREAKS_INSIDE_MODULES
    if _BREAKS_INSIDE_MODULES is None:
        graphs = []

        def probe_backend(graph_module, example_inputs):
            graphs.append(graph_module)
            return graph_module.forward

        probe = torch.nn.ReLU()
        probe.register_forward_hook(torch._dynamo.disable(lambda module, inputs, output: None))
        torch.compile(probe, backend=probe_backend, **_ISOLATE_RECOMPILES)(torch.ones(2))
        _BREAKS_INSIDE_MODULES = bool(graphs)
    return _BREAKS_INSIDE_MODULES


class _LeafCompiled:
    """A region run eagerly with each leaf module's forward compiled on its own (where Dynamo cannot compile a
    hooked built-in module's call, `_breaks_inside_modules`): the hooks run outside compiled code and every
    leaf's output is its compiled forward's, as the graph broken at every module gives on newer torch. The
    compiled forwards are set on the leaves for the call only, so nothing stays on the user's modules: a forward
    of the user's own on an instance (as accelerate and PEFT install) is compiled as the leaf's forward and put
    back after each call."""

    def __init__(self, original, backend):
        self.original = original
        self.forwards = [(leaf, torch.compile(_own_frame(leaf.forward), backend=backend, **_ISOLATE_RECOMPILES))
                         for leaf in original.modules() if next(leaf.children(), None) is None]

    def __call__(self, *args, **kwargs):
        saved = []
        try:
            for leaf, forward in self.forwards:
                saved.append((leaf, leaf.__dict__.get("forward", _NO_FORWARD)))
                leaf.forward = forward
            return self.original._call_impl(*args, **kwargs)
        finally:
            for leaf, own in saved:
                if own is _NO_FORWARD:
                    leaf.__dict__.pop("forward", None)
                else:
                    leaf.forward = own


_NO_FORWARD = object()


def _own_frame(forward):
    """`forward` called from a frame whose code object is this leaf's alone: Dynamo keeps its compiled entries and
    counts recompiles per code object, and every Linear shares `Linear.forward`'s (torch 2.11 wraps a function
    it does not compile on its own, such as a built-in module's forward, in one shared `inner`): without this,
    the ninth leaf of a model would pass the recompile limit and run eagerly."""
    def leaf_forward(*args, **kwargs):
        return forward(*args, **kwargs)

    leaf_forward.__code__ = leaf_forward.__code__.replace()
    return leaf_forward


def _window_compile(region, original, interpret, leafwise):
    """The compiled callable of `original` (the region's eager module) used during dump windows; `leafwise`: our
    module hooks are on its modules and this Dynamo compiles no hooked module call (leaf by leaf instead)."""
    cached = _WINDOW_COMPILES[interpret, leafwise].get(region)
    if cached is None:
        if leafwise and interpret:
            # interpret_compiled runs eager kernels with the modes on: here, the module itself (its glue included)
            cached = _Interpreted(original)
            _WINDOW_COMPILES[interpret, leafwise][region] = cached
            return cached
        backend = InterpreterBackend() if interpret else user_backend(region)
        if isinstance(backend, str):
            from torch._dynamo.backends.registry import lookup_backend

            backend = lookup_backend(backend)
        if leafwise:
            cached = _LeafCompiled(original, WindowBackend(backend))
        else:
            cached = torch.compile(original.__call__ if is_optimized(region) else original._call_impl,
                                   backend=WindowBackend(backend), **_ISOLATE_RECOMPILES)
        _WINDOW_COMPILES[interpret, leafwise][region] = cached
    return cached


class _Interpreted:
    """interpret_compiled where Dynamo cannot compile a hooked module's call: the region's module run eagerly
    with the dump's modes back on the stack, which records what InterpreterBackend would (eager kernels, every
    API/ATen call under its eager name)."""

    def __init__(self, original):
        self.original = original

    def __call__(self, *args, **kwargs):
        with _running_modes_on():
            return self.original._call_impl(*args, **kwargs)


class CompiledRegions:
    """Reroutes the compiled regions of `models` for one dump window (see the module docstring)."""

    def __init__(self, collector, regions, module_level, modes, interpret=False, shadow=False):
        self.collector = collector
        self.regions = regions
        self.module_level = module_level  # L0/mix: run through the window compile with hooks seen
        self.modes = modes  # () -> [(mode, pop_context_factory)] currently entered by the session
        self.interpret = interpret and bool(modes())  # interpret_compiled, where an API/ATen mode records
        self.shadow = shadow and module_level and not self.interpret  # shadow_compiled (L0/mix)

    def install(self, session):
        rerouted = self.module_level or self.interpret
        for name, region in self.regions:
            original = region._orig_mod if is_optimized(region) else region
            with _modes_off(self.modes()):  # Dynamo must not trace our modes (the probe and the compiles)
                leafwise = self.module_level and not _breaks_inside_modules()
                compiled = _window_compile(region, original, self.interpret, leafwise) if rerouted else None
            note = self._note(name or "<root>", region, leafwise)
            if self.shadow:
                note["observed"] = ("each hooked module's inputs and outputs, from a second no-grad forward of the "
                                    "region compiled with a graph break at every module (shadow_compiled); the step "
                                    "itself ran the user's compiled graph")
                note["not_observed"] = "module backward; the API/ATen calls inside the compiled graph"
            if is_optimized(region):
                session.patch(region, "forward", self._wrap(region.forward, compiled, note, original))
            else:
                session.patch(region, "_compiled_call_impl",
                              self._wrap(region._compiled_call_impl, compiled, note, original))

    def _note(self, name, region, leafwise):
        backend = str(backend_name(user_backend(region)))
        if self.interpret:
            how = ("the region's module run eagerly with the dump's modes on (this torch's Dynamo compiles no module "
                   "call that holds a hook)" if leafwise else
                   "Dynamo's graph run node by node through torch.fx.Interpreter")
            return {"module": name, "backend": backend, "observed": f"every API/ATen call inside the region, {how} "
                    "(interpret_compiled)",
                    "not_observed": "the compiled kernels: the region ran eager kernels in the dump window"}
        if leafwise:
            observed = ("each hooked module's inputs and outputs; each leaf module's forward compiled on its own "
                        "during the dump window (this torch's Dynamo compiles no module call that holds a hook), "
                        "the code of modules with children run eagerly, so the step can differ in low precision "
                        "from the whole-region compile; shadow_compiled keeps the step bit-identical")
        elif self.module_level:
            observed = ("each hooked module's inputs and compiled outputs (Dynamo breaks the graph at every "
                        "module boundary during the dump window, so the step computes what each module compiled "
                        "on its own gives, which can differ in low precision from the whole-region compile; "
                        "shadow_compiled keeps the step bit-identical)")
        else:
            observed = "the calls around the region; the region itself ran the user's compiled graph"
        return {"module": name, "backend": backend, "observed": observed,
                "not_observed": "the API/ATen calls inside the compiled graph, call by call"}

    def _wrap(self, users_call, compiled, note, original):
        collector, modes, interpret, shadow = self.collector, self.modes, self.interpret, self.shadow

        def compiled_region_call(*args, **kwargs):
            if collector.active:
                collector.note_compiled_region(note)
                if note["module"] not in _LOGGED:
                    _LOGGED.add(note["module"])
                    logger.info(f"msprobe: module '{note['module']}' ran compiled ({note['backend']}); "
                                f"recorded: {note['observed']}; not recorded call by call: {note['not_observed']}.")
            current = modes()
            previous, _RUNNING.modes = _RUNNING.modes, (current if interpret else ())
            try:
                with _modes_off(current):
                    if not shadow:
                        return (compiled or users_call)(*args, **kwargs)
                    if collector.active:
                        with _shadow_state(original), torch.no_grad():
                            compiled(*args, **kwargs)  # the module hooks record its boundaries
                    with _hooks_detached(original):
                        return users_call(*args, **kwargs)
            finally:
                _RUNNING.modes = previous

        return compiled_region_call


_HOOK_DICTS = ("_forward_pre_hooks", "_forward_hooks", "_forward_pre_hooks_with_kwargs",
               "_forward_hooks_with_kwargs", "_forward_hooks_always_called")


@contextlib.contextmanager
def _hooks_detached(module):
    """msprobe's forward hooks (marked `_msprobe_hook`) off every submodule of `module`, back after."""
    saved = []
    for sub in module.modules():
        ours = [key for attr in ("_forward_pre_hooks", "_forward_hooks")
                for key, hook in getattr(sub, attr).items() if getattr(hook, "_msprobe_hook", False)]
        if ours:
            saved.append((sub, {attr: dict(getattr(sub, attr)) for attr in _HOOK_DICTS}))
            for attr in _HOOK_DICTS:
                for key in ours:
                    getattr(sub, attr).pop(key, None)
    try:
        yield
    finally:
        for sub, dicts in saved:
            for attr, content in dicts.items():
                getattr(sub, attr).clear()
                getattr(sub, attr).update(content)


@contextlib.contextmanager
def _shadow_state(module):
    """A forward whose side effects are undone: RNG streams forked, buffers (running statistics) restored."""
    buffers = [(buffer, buffer.detach().clone()) for buffer in module.buffers()]
    devices = sorted({b.device.index or 0 for b, _ in buffers if b.device.type == "cuda"})
    with torch.random.fork_rng(devices=devices):
        try:
            yield
        finally:
            with torch.no_grad():
                for buffer, value in buffers:
                    buffer.copy_(value)


@contextlib.contextmanager
def _modes_off(modes):
    """Our TorchFunctionMode / TorchDispatchMode off the stack (when on top), back after."""
    with contextlib.ExitStack() as stack:
        for mode in modes:
            if isinstance(mode, torch.overrides.TorchFunctionMode):
                if torch.overrides._get_current_function_mode() is mode:
                    stack.enter_context(torch.overrides._pop_mode_temporarily())
            elif torch.utils._python_dispatch._get_current_dispatch_mode() is mode:
                stack.enter_context(torch.utils._python_dispatch._pop_mode_temporarily())
        yield
