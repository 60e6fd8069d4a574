"""Run one recorded MindSpore API (PyNative, CPU) and its high-precision bench, forward and backward.

Tested: the mint / Tensor API in the recorded dtypes on the CPU device of MindSpore.
Bench: the equivalent PyTorch op on the CPU with floating inputs upcast (bfloat16/float16 -> float32,
float32 -> float64) when torch is installed and has the op; otherwise the MindSpore op itself on
upcast inputs. Both sides get the same input values. Verdict: pass when cosine > 0.99 and max abs
error < 0.0001 (against the bench rounded to the tested dtype), integer/bool outputs must be equal.
"""

import numpy as np

from msprobe.core.errors import UnsupportedError
from msprobe.core.precision import metrics
from msprobe.core.precision.output_check import ERROR, PASS, ZERO_MESSAGE, judge_cosine_abs, zero_up_to_rounding
from msprobe.core.run_ut.arg_template import fill, plain_scalar, slot_arrays, template_of, tensor_file_path
from msprobe.core.run_ut.executor import SideRun, executor_factory, save_error_arrays
from msprobe.core.run_ut.executor import run_case as run_checked_case
from msprobe.core.run_ut.random_data import kind_of_dtype, rng_for
from msprobe.mindspore.api_accuracy_checker.api_map import (ms_dtype, resolve_mindspore, resolve_torch,
                                                            torch_dtype_of)
from msprobe.mindspore.api_accuracy_checker.replay_guard import check_call_size

__all__ = ["make_executor", "run_case", "MindSporeOps", "saved_tensor", "call_arguments",
           "call_input_grads"]

_UPCAST = {"bfloat16": "float32", "float16": "float32", "float32": "float64"}


def _load_array(tensor_dir, record):
    """The array of a record's `data_name`: a plain file name inside tensor_dir, read without pickle."""
    name = record["data_name"]
    path = tensor_file_path(tensor_dir, name)
    try:
        array = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise UnsupportedError(f"tensor file {name} cannot be read safely: {str(exc)[:200]}") from None
    if not isinstance(array, np.ndarray):
        raise UnsupportedError(f"tensor file {name} holds a {type(array).__name__}, not one array")
    return array


def saved_tensor(tensor_dir, record):
    """The MindSpore tensor a record's `data_name` file holds, in the recorded dtype (a bfloat16 tensor is
    saved widened to float32; narrowing it back is exact)."""
    import mindspore as ms

    dtype = _short(record.get("dtype", "float32"))
    array = _load_array(tensor_dir, record)
    return ms.Tensor(array.astype(np.float32) if dtype == "bfloat16" else array, dtype=ms_dtype(dtype))


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
        load = (lambda rec: _load_array(tensor_dir, rec)) if tensor_dir else None
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


def call_arguments(record, name, tensor_dir):
    """(args, kwargs) of a recorded forward call, rebuilt as the tested side of run_ut rebuilds them: new
    MindSpore tensors in the recorded dtypes from the files in tensor_dir."""
    inputs = _Inputs(_RecordedCall(name, record), tensor_dir)
    return fill(inputs.template.args, inputs.tensors, _ms_scalar), fill(inputs.template.kwargs, inputs.tensors,
                                                                        _ms_scalar)


def call_input_grads(function, record, backward_record, name, tensor_dir):
    """The input gradients (MindSpore tensors, one per floating input, in argument order) of a recorded call:
    its forward rebuilt from the files in tensor_dir, then the output gradients the backward record saved
    propagated back through `function` (ms.vjp), as run_ut's tested side does."""
    case = _RecordedCall(name, record, backward_record)
    inputs = _Inputs(case, tensor_dir)
    if not inputs.float_slots:
        raise UnsupportedError(f"{name}: no floating input to take a gradient for")
    outputs, vjp = _mindspore_forward(function, inputs, with_grad=True)
    return _input_grads(outputs, vjp, _grad_arrays(case, outputs, tensor_dir))


class _RecordedCall:
    """The fields of an ApiCase that _Inputs and _grad_arrays read."""

    def __init__(self, name, forward, backward=None):
        self.name, self.forward, self.backward = name, forward, backward


def _grad_arrays(case, outputs, tensor_dir):
    """Output gradients (numpy) from the backward record, None where none is recorded."""
    records = list((case.backward or {}).get("input") or [])
    rng = rng_for(f"{case.name}.backward")
    load = (lambda rec: _load_array(tensor_dir, rec)) if tensor_dir else None
    grads = []
    for position, out in enumerate(outputs):
        record = records[position] if position < len(records) else None
        if not isinstance(record, dict) or "shape" not in record:
            grads.append(None)
            continue
        array = slot_arrays([record], rng, load)[0]
        grads.append(array.reshape(np.shape(out)) if array.size == np.size(out) else None)
    return grads


def _forward_args(inputs, float_tensors, scalar):
    tensors = list(inputs.tensors)
    for slot, tensor in zip(inputs.float_slots, float_tensors):
        tensors[slot] = tensor
    return fill(inputs.template.args, tensors, scalar), fill(inputs.template.kwargs, tensors, scalar)


def _mindspore_forward(function, inputs, with_grad):
    """(flattened outputs, vjp function or None) of the MindSpore op."""
    import mindspore as ms

    def forward(*float_tensors):
        args, kwargs = _forward_args(inputs, float_tensors, _ms_scalar)
        return function(*args, **kwargs)

    float_tensors = [inputs.tensors[i] for i in inputs.float_slots]
    if not with_grad:
        return _flatten(forward(*float_tensors)), None
    out, vjp_fn = ms.vjp(forward, *float_tensors)
    return _flatten(out), (vjp_fn, isinstance(out, (tuple, list)))


def _input_grads(outputs, vjp, grads):
    """Input gradients (MindSpore tensors, one per float input) of the op for output gradients `grads`
    (numpy or None)."""
    import mindspore as ms

    vjp_fn, several = vjp
    sens = [ms.Tensor(g.astype(np.float32), dtype=o.dtype) if g is not None else ms.ops.zeros_like(o)
            for o, g in zip(outputs, grads)]
    input_grads = vjp_fn(tuple(sens) if several else sens[0])
    return list(input_grads) if isinstance(input_grads, (tuple, list)) else [input_grads]


def _mindspore_backward(outputs, vjp, grads):
    """Input gradients (numpy) of the MindSpore op for output gradients `grads` (numpy or None)."""
    return [_ms_to_numpy(g) for g in _input_grads(outputs, vjp, grads)]


def _torch_forward(function, inputs, with_grad):
    """(flattened outputs, leaves) of the PyTorch bench on the same values, upcast."""
    import torch

    tensors = [torch.from_numpy(np.array(value)).to(torch_dtype_of(_UPCAST.get(dtype, dtype)))
               for value, dtype in zip(inputs.values, inputs.dtypes)]
    leaves = [tensors[i].requires_grad_(with_grad) for i in inputs.float_slots]
    args = fill(inputs.template.args, tensors, _torch_scalar)
    kwargs = fill(inputs.template.kwargs, tensors, _torch_scalar)
    return _flatten(function(*args, **kwargs)), leaves


def _torch_backward(outputs, leaves, grads):
    import torch

    pairs = [(o, torch.from_numpy(np.array(g)).to(o.dtype)) for o, g in zip(outputs, grads)
             if g is not None and isinstance(o, torch.Tensor) and o.requires_grad]
    if pairs:
        torch.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
    return [(leaf.grad if leaf.grad is not None else torch.zeros_like(leaf)).detach().to(torch.float64).numpy()
            for leaf in leaves]


def _torch_to_numpy(value):
    import torch

    if isinstance(value, torch.Tensor):
        value = value.detach()
        return value.to(torch.float64).numpy() if value.is_floating_point() else value.numpy()
    return np.asarray(value)


def _dtype_names(outputs):
    return [str(o.dtype) if hasattr(o, "dtype") else type(o).__name__ for o in outputs]


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
            elif zero_up_to_rounding(pair, _short(tested_dtypes[index])):
                row.update(status=PASS, message=ZERO_MESSAGE)
            else:
                row["status"], row["message"] = judge_cosine_abs(row["cosine"], row["max_abs_err"])
        rows.append(row)
    return rows


def _check_size(case, inputs, torch_function):
    """Refuse (one line) a call that would make a tensor over the cap: sized through its PyTorch bench on
    the meta device when there is one (see replay_guard)."""
    shapes = [tuple(np.shape(value)) for value in inputs.values]
    torch_sizing = None
    if torch_function is not None:
        def torch_sizing():
            import torch

            from msprobe.core.framework import get_framework

            tensors = [torch.empty(shape, dtype=torch_dtype_of(dtype), device="meta")
                       for shape, dtype in zip(shapes, inputs.dtypes)]
            size = get_framework("pytorch").replay_sizer()
            size(torch_function, fill(inputs.template.args, tensors, _torch_scalar),
                 fill(inputs.template.kwargs, tensors, _torch_scalar), api_name=case.name)
    plain = fill([inputs.template.args, inputs.template.kwargs], [None] * len(shapes), _ms_scalar)
    check_call_size(case.name, shapes, plain, torch_sizing)


class _Side:
    """What one side of a MindSpore run_ut call keeps between forward and backward."""

    def __init__(self, kind, inputs, tensor_dir, function=None):
        self.kind = kind            # "mindspore" or "torch"
        self.inputs = inputs        # _Inputs in this side's dtypes
        self.tensor_dir = tensor_dir
        self.function = function    # the torch bench function (kind "torch")
        self.raw_outputs = []       # framework values, for backward
        self.dtypes = []            # dtype names of the outputs
        self.backward_state = None  # input gradients (MindSpore, computed with the forward) or leaves (torch)


class MindSporeOps:
    """`FrameworkOps` of MindSpore: the tested op in MindSpore, the bench in PyTorch when it has the
    op (and `settings['torch_bench']` is not False), else the MindSpore op on upcast inputs."""

    failing_statuses = (ERROR,)
    empty_forward_status = ""

    def resolve(self, case):
        return resolve_mindspore(case.prefix, case.api)

    def build_inputs(self, case, settings):
        tensor_dir = settings.get("tensor_dir")
        inputs = _Inputs(case, tensor_dir)
        torch_function = resolve_torch(case.prefix, case.api) if settings.get("torch_bench", True) else None
        _check_size(case, inputs, torch_function)  # before the MindSpore op runs
        bench = (_Side("torch", inputs, tensor_dir, torch_function) if torch_function is not None
                 else _Side("mindspore", inputs.upcast(), tensor_dir))
        with_grad = case.backward is not None and bool(inputs.float_slots)
        return SideRun(_Side("mindspore", inputs, tensor_dir)), SideRun(bench), with_grad

    def forward(self, case, function, side, with_grad, is_bench):
        state = side.inputs
        if state.kind == "torch":
            state.raw_outputs, state.backward_state = _torch_forward(state.function, state.inputs, with_grad)
            side.outputs = [_torch_to_numpy(o) for o in state.raw_outputs]
        else:
            state.raw_outputs, vjp = _mindspore_forward(function, state.inputs, with_grad)
            side.outputs = [_ms_to_numpy(o) for o in state.raw_outputs]
            if vjp is not None:  # now: the next ms.vjp (the other side) replaces this one's graph
                grads = _grad_arrays(case, state.raw_outputs, state.tensor_dir)
                state.backward_state = _mindspore_backward(state.raw_outputs, vjp, grads)
        state.dtypes = _dtype_names(state.raw_outputs)

    def backward(self, case, settings, tested, bench):
        for side in (tested, bench):
            state = side.inputs
            if state.kind == "torch":
                grads = _grad_arrays(case, tested.outputs, settings.get("tensor_dir"))
                side.grads = _torch_backward(state.raw_outputs, state.backward_state, grads)
            else:
                side.grads = state.backward_state  # computed with the forward
        return ""

    def compare(self, prefix, tested, bench, tested_side, bench_side):
        if ".backward." not in prefix:
            return _compare(prefix, tested, bench, tested_side.inputs.dtypes, bench_side.inputs.dtypes)
        inputs = tested_side.inputs.inputs
        grad_dtypes = [str(inputs.tensors[i].dtype) for i in inputs.float_slots]
        prefix_of_bench = "torch." if bench_side.inputs.kind == "torch" else ""
        return _compare(prefix, tested, bench, grad_dtypes,
                        [prefix_of_bench + _UPCAST.get(_short(d), _short(d)) for d in grad_dtypes])

    def save_error_data(self, folder, case, tested, bench):
        groups = {"input": tested.inputs.inputs.values, "output.tested": tested.outputs,
                  "output.bench": bench.outputs}
        save_error_arrays(folder, case.name, groups, "npy", _save_array)


def _save_array(value, path):
    np.save(path, np.asarray(value))
    return True


def run_case(case, settings):
    """Outcome dict of one ApiCase (see msprobe.core.run_ut.report.ResultWriter.write)."""
    return run_checked_case(case, settings, MindSporeOps())


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
    return executor_factory(MindSporeOps(), settings)
