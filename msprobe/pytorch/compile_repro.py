"""The minimal repro of compile_check: one module, its recorded inputs, eager vs compiled, no msprobe.

write_repro() runs the model eagerly once more to catch the suspect module's first call inputs, and
writes to a folder: module.pt (the module, pickled whole), inputs.pt ({"args", "kwargs"}) and
repro.py, which loads both, runs the module eager and through torch.compile with the same backend, and
prints how far the outputs part, in epsilons of their dtype (exit status 1 beyond 4 epsilons, the
allowance compare gives a whole tensor of the same dtype).
"""
import copy
import inspect
import os

__all__ = ["write_repro"]

_SCRIPT = '''"""Standalone repro written by msprobe compile_check: {module_path} ({class_name}), eager vs torch.compile.

Run: python repro.py   (needs torch and the packages the module's class comes from; not msprobe)
"""
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
{backend_lines}


def tensors(value):
    if isinstance(value, torch.Tensor):
        return [value] if value.is_floating_point() else []
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in tensors(v)]
    return []


def main():
    module = torch.load(os.path.join(HERE, "module.pt"), weights_only=False)
    inputs = torch.load(os.path.join(HERE, "inputs.pt"), weights_only=False)
    torch.manual_seed({seed})
    eager = tensors(module(*inputs["args"], **inputs["kwargs"]))
    torch.manual_seed({seed})
    compiled = tensors(torch.compile(module, backend=BACKEND)(*inputs["args"], **inputs["kwargs"]))
    rows = []
    for index, (e, c) in enumerate(zip(eager, compiled)):
        eps = torch.finfo(e.dtype).eps
        e64, c64 = e.detach().double(), c.detach().double()
        error = float(torch.linalg.vector_norm(c64 - e64) / (eps * max(float(torch.linalg.vector_norm(e64)), 1e-30)))
        rows.append({{"output": index, "dtype": str(e.dtype), "max_abs_diff": float((c64 - e64).abs().max()),
                     "error_in_eps": error}})
    departs = any(row["error_in_eps"] > 4 for row in rows)
    print(json.dumps({{"module": "{module_path}", "departs": departs, "outputs": rows}}, indent=2))
    return 1 if departs else 0


if __name__ == "__main__":
    sys.exit(main())
'''


def _backend_lines(backend):
    """Python lines that define BACKEND in the script: the backend's name, or an import of the callable."""
    if isinstance(backend, str):
        return f"BACKEND = {backend!r}"
    name = getattr(backend, "__qualname__", None)
    module = getattr(backend, "__module__", None)
    try:
        folder = os.path.dirname(os.path.abspath(inspect.getfile(backend)))
    except TypeError:
        folder = None
    if not name or not module or module == "__main__" or "<locals>" in name or folder is None:
        raise ValueError("the backend is no importable function; the repro uses 'inductor'")
    return (f"sys.path.insert(0, {folder!r})  # where the backend's module was found\n"
            f"BACKEND = __import__({module!r}, fromlist=['_'])\n"
            + "".join(f"BACKEND = getattr(BACKEND, {part!r})\n" for part in name.split(".")))


def _capture_inputs(model, module_path, args, kwargs, seed):
    """Detached copies of the first call inputs of `module_path` in an eager forward of a copy of `model`."""
    import torch

    model = copy.deepcopy(model)
    target = model.get_submodule(module_path)
    caught = {}

    def pre_hook(module, call_args, call_kwargs):
        if not caught:
            caught["args"], caught["kwargs"] = _detached((call_args, call_kwargs))
    handle = target.register_forward_pre_hook(pre_hook, with_kwargs=True)
    try:
        torch.manual_seed(seed)
        with torch.no_grad():
            model(*args, **kwargs)
    finally:
        handle.remove()
    return target, caught


def _detached(value):
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_detached(v) for v in value)
    if isinstance(value, dict):
        return {k: _detached(v) for k, v in value.items()}
    return value


def write_repro(model, module_path, args, kwargs, backend, folder, seed=0):
    """Write the repro of `module_path` (a path of model.named_modules()) into `folder`; its paths."""
    import torch

    from msprobe.core.log import logger
    from msprobe.core.paths import make_dir

    folder = make_dir(folder, what="repro folder")
    module, inputs = _capture_inputs(model, module_path, args, kwargs, seed)
    try:
        lines = _backend_lines(backend)
    except ValueError as exc:
        logger.warning(f"compile_check repro: {exc}.")
        lines = "BACKEND = 'inductor'"
    torch.save(module, os.path.join(folder, "module.pt"))
    torch.save(inputs, os.path.join(folder, "inputs.pt"))
    script = os.path.join(folder, "repro.py")
    with open(script, "w", encoding="utf-8") as handle:
        handle.write(_SCRIPT.format(module_path=module_path, class_name=type(module).__name__,
                                    backend_lines=lines, seed=seed))
    return {"script": script, "module": os.path.join(folder, "module.pt"), "inputs": os.path.join(folder, "inputs.pt")}
