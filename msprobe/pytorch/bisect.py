"""PyTorch side of precision bisection: run the user's `bisect_target()` with chosen modules upcast to float32
(inputs cast up, outputs cast back to the dtype that came in), one fresh target per trial."""
from typing import Any, Callable, FrozenSet, List, Tuple

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
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(_cast(v, dtype, only_from) for v in value)
    if isinstance(value, list):
        return [_cast(v, dtype, only_from) for v in value]
    if isinstance(value, dict):
        return {k: _cast(v, dtype, only_from) for k, v in value.items()}
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


def upcast_modules(model, names: FrozenSet[str]) -> None:
    """Upcast the named submodules of `model` in place (ROOT: the model itself)."""
    import torch

    for name in names:
        module = model if name == ROOT else model.get_submodule(name)
        module.float()
        came_in: List[Any] = []

        def before(_module, args, kwargs, came_in=came_in):
            came_in.append(_first_float_dtype((args, kwargs)))
            return _cast(args, torch.float32), _cast(kwargs, torch.float32)

        def after(_module, _args, _kwargs, output, came_in=came_in):
            dtype = came_in.pop() if came_in else None
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
