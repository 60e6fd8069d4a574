"""Run one recorded MindSpore API (PyNative, CPU) and its high-precision bench, forward and backward.

Tested: the mint / Tensor API in the recorded dtypes on the CPU device of MindSpore.
Bench: the equivalent PyTorch op on the CPU with floating inputs upcast (bfloat16/float16 -> float32,
float32 -> float64) when torch is installed and has the op; otherwise the MindSpore op itself on
upcast inputs. Both sides get the same input values. Verdict: pass when cosine > 0.99 and max abs
error < 0.0001 (against the bench rounded to the tested dtype), integer/bool outputs must be equal.
"""
import os

import numpy as np

from msprobe.core.errors import UnsupportedError
from msprobe.core.precision import metrics
from msprobe.core.precision.output_check import ERROR, PASS, aggregate_status, judge_cosine_abs
from msprobe.core.run_ut.arg_template import fill, plain_scalar, slot_arrays, template_of
from msprobe.core.run_ut.random_data import kind_of_dtype, rng_for
from msprobe.core.run_ut.runner import run_or_skip
from msprobe.mindspore.api_accuracy_checker.api_map import (ms_dtype, resolve_mindspore, resolve_torch,
                                                            torch_dtype_of)

__all__ = ["make_executor", "run_case"]

_UPCAST = {"bfloat16": "float32", "float16": "float32", "float32": "float64"}


def _short(dtype):
    return str(dtype).rsplit(".", 1)[-1].lower()


def _scalar_rebuilder(dtype_of):
    """fill() callback for non-tensor arguments; dtype records become dtype_of(name) (MindSpore or torch)."""
    def rebuild(record):
        value = plain_scalar(record)
        if value is not None or record.get("type") in ("int", "float", "bool", "str"):
            return value
        if "dtype" in str(record.get("type", "")).lower():
            return dtype_of(record.get("value"))
        raise UnsupportedError(f"argument of type {record.get('type')!r} cannot be rebuilt")
    return rebuild


_ms_scalar = _scalar_rebuilder(ms_dtype)
_torch_scalar = _scalar_rebuilder(torch_dtype_of)


def _ms_to_numpy(value):
    import mindspore as ms

    if isinstance(value, ms.Tensor):
        if _short(value.dtype) in ("bfloat16",):
            value = value.astype(ms.float32)
        return value.asnumpy()
    return np.asarray(value)


def _flatten(value):
    if isinstance(value, (list, tuple)):
        return [item for part in value for item in _flatten(part)]
    return [] if value is None else [value]


class _Inputs:
    """The tested MindSpore tensors of one call and their dtypes."""

    def __init__(self, case, tensor_dir):
        import mindspore as ms

        self.template = template_of(case.forward)
        load = (lambda rec: np.load(os.path.join(tensor_dir, rec["data_name"]))) if tensor_dir else None
        arrays = slot_arrays(self.template.tensors, rng_for(f"{case.name}.forward"), load)
        self.dtypes = [_short(rec.get("dtype", "float32")) for rec in self.template.tensors]
        self.tensors = [ms.Tensor(arr.astype(np.float32) if dt == "bfloat16" else arr, dtype=ms_dtype(dt))
                        for arr, dt in zip(arrays, self.dtypes)]
        self.values = [_ms_to_numpy(t) for t in self.tensors]   # exactly what the tested op sees
        self.float_slots = [i for i, dt in enumerate(self.dtypes) if kind_of_dtype(dt) == "float"]

    def upcast(self):
        """A copy holding the same values in MindSpore tensors of the bench dtypes."""
        import copy

        import mindspore as ms

        twin = copy.copy(self)
        twin.dtypes = [_UPCAST.get(dt, dt) for dt in self.dtypes]
        twin.tensors = [ms.Tensor(v.astype(dt) if kind_of_dtype(dt) == "float" else v, dtype=ms_dtype(dt))
                        for v, dt in zip(self.values, twin.dtypes)]
        return twin


def _grad_arrays(case, outputs, tensor_dir):
    """Output gradients (numpy) from the backward record, None where none is recorded."""
    records = list((case.backward or {}).get("input") or [])
    rng = rng_for(f"{case.name}.backward")
    load = (lambda rec: np.load(os.path.join(tensor_dir, rec["data_name"]))) if tensor_dir else None
    grads = []
    for position, out in enumerate(outputs):
        record = records[position] if position < len(records) else None
        if not isinstance(record, dict) or "shape" not in record:
            grads.append(None)
            continue
        array = slot_arrays([record], rng, load)[0]
        grads.append(array.reshape(np.shape(out)) if array.size == np.size(out) else None)
    return grads


def _run_tested(function, inputs, grads_for=None, tensor_dir=None, case=None):
    """(outputs as numpy, their dtype names, input gradients as numpy or None) of the MindSpore op."""
    import mindspore as ms

    def forward(*float_tensors):
        tensors = list(inputs.tensors)
        for slot, tensor in zip(inputs.float_slots, float_tensors):
            tensors[slot] = tensor
        args = fill(inputs.template.args, tensors, _ms_scalar)
        kwargs = fill(inputs.template.kwargs, tensors, _ms_scalar)
        return function(*args, **kwargs)

    if not grads_for:
        outputs = _flatten(forward(*[inputs.tensors[i] for i in inputs.float_slots]))
        return [_ms_to_numpy(o) for o in outputs], _dtype_names(outputs), None
    out, vjp_fn = ms.vjp(forward, *[inputs.tensors[i] for i in inputs.float_slots])
    outputs = _flatten(out)
    grads = _grad_arrays(case, outputs, tensor_dir)
    sens = [ms.Tensor(g.astype(np.float32), dtype=o.dtype) if g is not None else ms.ops.zeros_like(o)
            for o, g in zip(outputs, grads)]
    input_grads = vjp_fn(sens[0] if not isinstance(out, (tuple, list)) else tuple(sens))
    input_grads = input_grads if isinstance(input_grads, (tuple, list)) else (input_grads,)
    return [_ms_to_numpy(o) for o in outputs], _dtype_names(outputs), [_ms_to_numpy(g) for g in input_grads]


def _dtype_names(outputs):
    return [str(o.dtype) if hasattr(o, "dtype") else type(o).__name__ for o in outputs]


def _run_torch_bench(function, inputs, grads):
    """(outputs, input gradients, bench dtype names) of the PyTorch bench; grads may be None."""
    import torch

    tensors = []
    for value, dtype in zip(inputs.values, inputs.dtypes):
        tensor = torch.from_numpy(np.array(value)).to(torch_dtype_of(_UPCAST.get(dtype, dtype)))
        tensors.append(tensor)
    leaves = [tensors[i].requires_grad_(grads is not None) for i in inputs.float_slots]
    args = fill(inputs.template.args, tensors, _torch_scalar)
    kwargs = fill(inputs.template.kwargs, tensors, _torch_scalar)
    outputs = _flatten(function(*args, **kwargs))
    input_grads = None
    if grads is not None:
        pairs = [(o, torch.from_numpy(np.array(g)).to(o.dtype)) for o, g in zip(outputs, grads)
                 if g is not None and isinstance(o, torch.Tensor) and o.requires_grad]
        if pairs:
            torch.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
        input_grads = [leaf.grad if leaf.grad is not None else torch.zeros_like(leaf) for leaf in leaves]
    as_numpy = [o.detach().to(torch.float64).numpy() if isinstance(o, torch.Tensor) and o.is_floating_point()
                else (o.numpy() if isinstance(o, torch.Tensor) else np.asarray(o)) for o in outputs]
    names = [str(o.dtype) if isinstance(o, torch.Tensor) else type(o).__name__ for o in outputs]
    grad_numpy = None if input_grads is None else [g.detach().to(torch.float64).numpy() for g in input_grads]
    return as_numpy, grad_numpy, names


def _round_to(values, dtype_name):
    """Bench values rounded to the tested dtype (float16/bfloat16/float32), as float64."""
    if dtype_name == "bfloat16":
        import torch
        return torch.from_numpy(np.asarray(values, np.float64)).to(torch.bfloat16).to(torch.float64).numpy()
    if dtype_name in ("float16", "float32"):
        return np.asarray(values).astype(dtype_name).astype(np.float64)
    return np.asarray(values)


def _compare(prefix, tested, bench, tested_dtypes, bench_dtypes):
    rows = []
    if len(tested) != len(bench):
        return [{"name": f"{prefix}.0", "status": ERROR, "message": f"{len(tested)} outputs, bench has {len(bench)}"}]
    for index, (t, b) in enumerate(zip(tested, bench)):
        t, b = np.asarray(t), np.asarray(b)
        row = {"name": f"{prefix}.{index}", "tested_dtype": tested_dtypes[index], "bench_dtype": bench_dtypes[index],
               "shape": str(list(t.shape))}
        if t.shape != b.shape:
            row.update(status=ERROR, message=f"shape {list(t.shape)} differs from bench {list(b.shape)}")
        elif kind_of_dtype(tested_dtypes[index]) != "float":
            equal = metrics.binary_error_rate(t, b) == 0
            row.update(cosine=1.0 if equal else metrics.cosine_similarity(t, b), max_abs_err=metrics.max_abs_error(t, b),
                       max_rel_err=metrics.max_relative_error(t, b), status=PASS if equal else ERROR,
                       message="" if equal else "integer/bool values differ")
        else:
            rounded = _round_to(b, _short(tested_dtypes[index]))
            pair = metrics.FinitePair(t, rounded)
            row.update(cosine=metrics.cosine_similarity(pair), max_abs_err=metrics.max_abs_error(pair),
                       max_rel_err=metrics.max_relative_error(pair))
            if t.size == 0:
                row.update(status=PASS, message="empty output")
            elif metrics.inf_nan_error_rate(t, rounded) > 0:
                row.update(status=ERROR, message="NaN/Inf differ from the bench")
            else:
                row["status"], row["message"] = judge_cosine_abs(row["cosine"], row["max_abs_err"])
        rows.append(row)
    return rows


def run_case(case, settings):
    """Outcome dict of one ApiCase (see msprobe.core.run_ut.report.ResultWriter.write)."""
    function = resolve_mindspore(case.prefix, case.api)
    tensor_dir = settings.get("tensor_dir")
    inputs = _Inputs(case, tensor_dir)
    with_grad = case.backward is not None and bool(inputs.float_slots)
    tested_out, tested_dtypes, tested_grads = _run_tested(function, inputs, with_grad, tensor_dir, case)
    grads = _grad_arrays(case, tested_out, tensor_dir) if with_grad else None
    torch_function = resolve_torch(case.prefix, case.api) if settings.get("torch_bench", True) else None
    if torch_function is not None:
        bench_out, bench_grads, bench_dtypes = _run_torch_bench(torch_function, inputs, grads)
    else:  # no PyTorch: the MindSpore op itself on upcast inputs
        bench_out, bench_dtypes, bench_grads = _run_tested(function, inputs.upcast(), with_grad, tensor_dir, case)
    forward_rows = _compare(f"{case.name}.forward.output", tested_out, bench_out, tested_dtypes, bench_dtypes)
    backward_rows = []
    if with_grad and tested_grads is not None and bench_grads is not None:
        grad_dtypes = [str(inputs.tensors[i].dtype) for i in inputs.float_slots]
        prefix = "torch." if torch_function is not None else ""
        backward_rows = _compare(f"{case.name}.backward.output", tested_grads, bench_grads, grad_dtypes,
                                 [prefix + _UPCAST.get(_short(d), _short(d)) for d in grad_dtypes])
    forward, backward = aggregate_status([r["status"] for r in forward_rows]), aggregate_status(
        [r["status"] for r in backward_rows])
    if settings.get("error_data_dir") and ERROR in (forward, backward):
        _save_error_data(settings["error_data_dir"], case.name, inputs.values, tested_out, bench_out)
    failing = [f"{r['name']}: {r['message']}" for r in forward_rows + backward_rows if r["status"] == ERROR]
    return {"api": case.name, "forward": forward, "backward": backward, "message": "; ".join(failing),
            "details": forward_rows + backward_rows}


def _save_error_data(folder, name, inputs, tested, bench):
    os.makedirs(folder, mode=0o750, exist_ok=True)
    for group, values in (("input", inputs), ("output.tested", tested), ("output.bench", bench)):
        for index, value in enumerate(values):
            path = os.path.join(folder, f"{name}.forward.{group}.{index}.npy")
            np.save(path, np.asarray(value))
            os.chmod(path, 0o640)


def make_executor(settings):
    """Executor factory: settings {'tensor_dir', 'error_data_dir', 'threads'} -> execute(case)."""
    import mindspore as ms

    ms.set_device("CPU")
    ms.runtime.launch_blocking()  # kernel errors surface at the failing API, not at a later one
    if settings.get("threads"):
        try:
            import torch
            torch.set_num_threads(int(settings["threads"]))
        except ImportError:
            pass

    def execute(case):
        return run_or_skip(run_case, case, settings)
    return execute
