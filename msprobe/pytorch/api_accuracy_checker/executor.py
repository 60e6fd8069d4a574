"""Run one recorded PyTorch API on the device under test and on the CPU high-precision bench, forward
and backward, and judge every output with the precision standards.

Device under test: CUDA device `-d` when CUDA is available, else the CPU, in the recorded dtypes.
Bench: the CPU with every floating input upcast (bfloat16/float16 -> float32, float32 -> float64).
`make_executor(settings)` is the executor factory used by `msprobe.core.run_ut.runner`.
"""
import os

import numpy as np
import torch

from msprobe.core.errors import UnsupportedError
from msprobe.core.precision.output_check import ERROR, SKIP, WARNING, aggregate_status, check_output
from msprobe.core.run_ut.runner import run_or_skip
from msprobe.pytorch.api_accuracy_checker.arguments import (bench_copy, build_call_args, build_grads,
                                                            flatten_tensors)
from msprobe.pytorch.api_accuracy_checker.op_resolver import is_inplace, resolve_api

__all__ = ["make_executor", "device_for", "run_case"]

_INDEXERS = (torch.Tensor.__getitem__, torch.Tensor.__setitem__)


def device_for(device_id):
    """'cuda:N' when CUDA is present, else 'cpu' (the CPU is then the device under test)."""
    if torch.cuda.is_available():
        return f"cuda:{int(device_id or 0)}"
    return "cpu"


def _call(function, call, inplace):
    args = call.args
    if len(args) == 2 and isinstance(args[1], list) and function in _INDEXERS:
        args = [args[0], tuple(args[1])]  # the dump stores an index tuple as a list
    if inplace and call.leaves:
        # an in-place op may not write into a leaf that requires grad: give it a differentiable copy
        leaf_ids = {id(leaf) for leaf in call.leaves}
        args = [a.clone() if isinstance(a, torch.Tensor) and id(a) in leaf_ids else a for a in args]
    return function(*args, **call.kwargs)


def _as_numpy(value):
    if isinstance(value, torch.Tensor):
        value = value.detach().to("cpu")
        if value.dtype.is_complex:
            raise UnsupportedError("complex output is not checked")
        return (value.to(torch.float64) if value.is_floating_point() else value).numpy()
    return np.asarray(value, dtype=np.float64)


def _dtype_text(value):
    return str(value.dtype) if isinstance(value, torch.Tensor) else type(value).__name__


def _compare(row_prefix, device_values, bench_values):
    if len(device_values) != len(bench_values):
        return [{"name": f"{row_prefix}.0", "status": ERROR,
                 "message": f"{len(device_values)} outputs on device, {len(bench_values)} on bench"}]
    rows = []
    for index, (tested, bench) in enumerate(zip(device_values, bench_values)):
        name = f"{row_prefix}.{index}"
        if tested is None or bench is None:
            continue
        rounded = None
        if isinstance(tested, torch.Tensor) and isinstance(bench, torch.Tensor) and tested.is_floating_point():
            rounded = _as_numpy(bench.detach().to(tested.dtype))
        row = check_output(name, _as_numpy(tested), _as_numpy(bench), _dtype_text(tested), rounded)
        shape = list(tested.shape) if isinstance(tested, torch.Tensor) else []
        row.update(name=name, bench_dtype=_dtype_text(bench), tested_dtype=_dtype_text(tested), shape=str(shape))
        rows.append(row)
    return rows


def _run_backward(outputs, grads):
    """Backpropagate `grads` (same shapes as `outputs`) into the leaves. Calls the autograd engine the
    way torch.autograd.backward does, minus its gradient-shape check: that check imports sympy on first
    use (0.3-0.8 s, paid again by every multi_run_ut worker); the engine checks shapes itself."""
    engine_run = getattr(torch.autograd.graph, "_engine_run_backward", None)
    if engine_run is None:
        torch.autograd.backward(outputs, grads)
        return
    engine_run(tuple(outputs), tuple(grads), False, False, (), allow_unreachable=True, accumulate_grad=True)


def _backward(case, device_call, bench_call, device_out, bench_out, tensor_dir, seed=None):
    """Rows of the input gradients, or (SKIP reason) when no gradient can be computed."""
    outputs_d, outputs_b = flatten_tensors(device_out), flatten_tensors(bench_out)
    grads = build_grads(case.backward, case.name, outputs_d, tensor_dir, seed)
    pairs = [(o, g) for o, g in zip(outputs_d, grads)
             if g is not None and isinstance(o, torch.Tensor) and o.requires_grad]
    if not pairs or not device_call.leaves:
        return None, "no differentiable output or input"
    bench_pairs = [(ob, g.detach().to("cpu").to(ob.dtype)) for ob, (od, g) in zip(outputs_b, zip(outputs_d, grads))
                   if g is not None and isinstance(od, torch.Tensor) and od.requires_grad]
    _run_backward([o for o, _ in pairs], [g for _, g in pairs])
    _run_backward([o for o, _ in bench_pairs], [g for _, g in bench_pairs])
    device_grads = [leaf.grad for leaf in device_call.leaves]
    bench_grads = [leaf.grad for leaf in bench_call.leaves]
    return _compare(f"{case.name}.backward.output", device_grads, bench_grads), ""


def _save_error_data(folder, case, device_call, device_out, bench_out):
    os.makedirs(folder, mode=0o750, exist_ok=True)
    groups = {"input": flatten_tensors(device_call.args) + flatten_tensors(list(device_call.kwargs.values())),
              "output.device": flatten_tensors(device_out), "output.bench": flatten_tensors(bench_out)}
    for group, values in groups.items():
        for index, value in enumerate(values):
            if isinstance(value, torch.Tensor):
                path = os.path.join(folder, f"{case.name}.forward.{group}.{index}.pt")
                torch.save(value.detach().to("cpu"), path)
                os.chmod(path, 0o640)


def run_case(case, settings, function=None, seed=None):
    """Outcome dict of one ApiCase (see msprobe.core.run_ut.report.ResultWriter.write).
    `function` replaces the resolved API (op_generate scripts); `seed` replaces the name-based seed."""
    device, tensor_dir = settings.get("device", "cpu"), settings.get("tensor_dir")
    with_grad = case.backward is not None
    function = function or resolve_api(case.prefix, case.api)
    inplace = is_inplace(case.api)
    device_call = build_call_args(case.forward, case.name, tensor_dir, device, with_grad, seed)
    bench_call = bench_copy(device_call)
    torch.default_generator.manual_seed(0)  # CPU generator only: seeding CUDA costs more than most ops
    device_out = _call(function, device_call, inplace)
    torch.default_generator.manual_seed(0)
    bench_out = _call(function, bench_call, inplace)
    forward_rows = _compare(f"{case.name}.forward.output", flatten_tensors(device_out), flatten_tensors(bench_out))
    backward_rows, backward_status, message = [], "", ""
    if with_grad:
        backward_rows, reason = _backward(case, device_call, bench_call, device_out, bench_out, tensor_dir, seed)
        if backward_rows is None:
            backward_rows, backward_status, message = [], SKIP, f"backward: {reason}"
        else:
            backward_status = aggregate_status([r["status"] for r in backward_rows])
    forward_status = aggregate_status([r["status"] for r in forward_rows]) or SKIP
    failing = [f"{r['name']}: {r['message']}" for r in forward_rows + backward_rows
               if r["status"] in (ERROR, WARNING) and r.get("message")]
    if settings.get("error_data_dir") and (forward_status in (ERROR, WARNING) or backward_status in (ERROR, WARNING)):
        _save_error_data(settings["error_data_dir"], case, device_call, device_out, bench_out)
    return {"api": case.name, "forward": forward_status, "backward": backward_status,
            "message": "; ".join([m for m in [message] + failing if m]), "details": forward_rows + backward_rows}


def make_executor(settings):
    """Executor factory: settings {'device_id' (or 'device'), 'tensor_dir', 'error_data_dir', 'threads'}
    -> execute(case)."""
    if settings.get("threads"):
        torch.set_num_threads(int(settings["threads"]))
    settings = dict(settings, device=settings.get("device") or device_for(settings.get("device_id", 0)))

    def execute(case):
        return run_or_skip(run_case, case, settings)
    return execute
