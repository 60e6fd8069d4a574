"""PyTorch side of precision bisection: run the user's `bisect_target()` with chosen modules upcast to float32
(inputs cast up, outputs cast back to the dtype that came in), one fresh target per trial."""
import copy
from typing import Any, Callable, Dict, FrozenSet, List, Tuple

from msprobe.core.bisect.run import ROOT, BisectError, bisect
from msprobe.core.user_script import call_user_function, load_script_function

__all__ = ["load_target", "upcast_modules", "run_bisect"]


def load_target(script: str) -> Callable[[], Tuple[Any, Callable[[], float]]]:
    """The script's `bisect_target` (the script is the user's own code: it runs, as their training would)."""
    return load_script_function(script, "bisect_target", "(model, evaluate)", BisectError)


def _cast(value, dtype, only_from=None):
    import torch

    if isinstance(value, torch.Tensor) and value.is_floating_point() and (only_from is None or value.dtype in only_from):
        return value.to(dtype)
    if isinstance(value, tuple):
        items = [_cast(v, dtype, only_from) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    if isinstance(value, list):
        return [_cast(v, dtype, only_from) for v in value]
    if isinstance(value, dict):
        if type(value) is dict:
            return {k: _cast(v, dtype, only_from) for k, v in value.items()}
        cast = copy.copy(value)  # a dict subclass (transformers' ModelOutput) keeps its type and attributes
        for key, item in value.items():
            cast[key] = _cast(item, dtype, only_from)
        return cast
    return value


def _first_float_dtype(value):
    import torch

    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.dtype
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
    for item in items:
        found = _first_float_dtype(item)
        if found is not None:
            return found
    return None


def _never_called(module) -> bool:
    """A container without a forward of its own (nn.ModuleList, nn.ModuleDict): its parent calls its children."""
    import torch

    return type(module).forward is torch.nn.Module.forward


def _hooked_modules(model, names: FrozenSet[str]) -> Dict[str, Any]:
    """The modules that get the upcast hooks for `names`: a name inside another named module is covered by it; a
    container that is never called stands for its children; a module holding a parameter that an upcast module
    shares (tied embeddings) is upcast with it, since a parameter has one dtype."""
    modules = dict(model.named_modules(remove_duplicate=False))
    chosen: Dict[str, Any] = {}

    def add(name):
        module = model if name == ROOT else modules[name]
        if _never_called(module) and name != ROOT:
            for child, _ in module.named_children():
                add(f"{name}.{child}")
        else:
            chosen[name] = module

    for name in names:
        if name != ROOT:
            model.get_submodule(name)  # an unknown name fails here, as it did before
        add(name)
    shared = {id(p) for module in chosen.values() for p in module.parameters()}
    for name, module in modules.items():
        if name and any(id(p) in shared for p in module.parameters(recurse=False)):
            chosen.setdefault(name, module)

    def covered(name):
        return name != ROOT and any(other == ROOT or name.startswith(other + ".") for other in chosen if other != name)

    hooked: Dict[str, Any] = {}
    for name, module in chosen.items():  # a module reachable under two names is hooked once
        if not covered(name) and all(module is not other for other in hooked.values()):
            hooked[name] = module
    return hooked


def _own_dtype(module):
    """The dtype of the module's first floating parameter or buffer (None when it has none)."""
    for tensor in list(module.parameters()) + list(module.buffers()):
        if tensor.is_floating_point():
            return tensor.dtype
    return None


def upcast_modules(model, names: FrozenSet[str]) -> None:
    """Upcast the named submodules of `model` in place (ROOT: the model itself). Floating inputs are cast to float32
    on the way in and float32 outputs back on the way out: to the dtype that came in, or, for a module whose inputs
    hold no floating tensor (an embedding, a backbone called with input_ids), to the module's own original dtype.
    The whole model's outputs go to evaluate() as float32."""
    import torch

    for name, module in _hooked_modules(model, names).items():
        original = _own_dtype(module)
        module.float()
        came_in: List[Any] = []

        def before(_module, args, kwargs, came_in=came_in):
            came_in.append(_first_float_dtype((args, kwargs)))
            return _cast(args, torch.float32), _cast(kwargs, torch.float32)

        def after(_module, _args, _kwargs, output, came_in=came_in, original=original, root=name == ROOT):
            dtype = came_in.pop() if came_in else None
            dtype = None if root else dtype or original
            return output if dtype in (None, torch.float32) else _cast(output, dtype, (torch.float32,))

        module.register_forward_pre_hook(before, with_kwargs=True)
        module.register_forward_hook(after, with_kwargs=True)


def run_bisect(script: str, output_dir: str, tolerance=None):
    target = load_target(script)

    def trial(names: FrozenSet[str]) -> float:
        model, evaluate = _fresh(target)
        upcast_modules(model, names)
        return call_user_function(evaluate, f"evaluate() with {sorted(names) or 'nothing'} upcast", BisectError)

    model, _ = _fresh(target)
    top_level = [name for name, _ in model.named_children()]
    structure = {name: [f"{name}.{child}" if name else child for child, _ in module.named_children()]
                 for name, module in model.named_modules()}
    del model
    return bisect(trial, top_level, lambda name: structure.get(name, []), output_dir, tolerance)


def _fresh(target):
    made = call_user_function(target, "bisect_target()", BisectError)
    if not (isinstance(made, tuple) and len(made) == 2 and callable(made[1])):
        raise BisectError("bisect_target() must return (model, evaluate), evaluate a function returning a float.")
    return made
