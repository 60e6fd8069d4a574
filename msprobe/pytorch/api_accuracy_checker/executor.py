"""Run one recorded PyTorch API on the device under test and on the CPU high-precision bench, forward
and backward, and judge every output with the precision standards.

Device under test: CUDA device `-d` when CUDA is available, else the CPU, in the recorded dtypes.
Bench: the CPU with every floating input upcast (bfloat16/float16 -> float32, float32 -> float64).
A call made under autocast (recorded with a float32 input and a float16/bfloat16 output: the dump sees
the arguments before autocast casts them) is replayed under autocast in that dtype on the device; the
bench gets the inputs rounded to that dtype as autocast rounds them, computed in float64, and every
result (a float32 weight's gradient too) is judged by that dtype's standard.
The flow is `msprobe.core.run_ut.executor`'s; `TorchOps` gives it PyTorch's callbacks, and
`make_executor(settings)` is the executor factory used by `msprobe.core.run_ut.runner`.
"""

import numpy as np
import torch

from msprobe.core.errors import UnsupportedError
from msprobe.core.naming import tensor_descriptors
from msprobe.core.precision.output_check import ERROR, SKIP, WARNING, check_output
from msprobe.core.run_ut.executor import SideRun, executor_factory, save_error_arrays
from msprobe.core.run_ut.executor import run_case as run_checked_case
from msprobe.pytorch.api_accuracy_checker.arguments import (bench_copy, build_call_args, build_grads,
                                                            flatten_tensors)
from msprobe.pytorch.api_accuracy_checker.op_resolver import is_inplace, resolve_api
from msprobe.pytorch.api_accuracy_checker.replay_guard import MAX_MADE_ELEMENTS, check_replayed_call

__all__ = ["make_executor", "device_for", "run_case", "TorchOps", "call_api", "run_backward"]

_INDEXERS = (torch.Tensor.__getitem__, torch.Tensor.__setitem__)


def device_for(device_id):
    """'cuda:N' when CUDA is present, else 'cpu' (the CPU is then the device under test)."""
    if torch.cuda.is_available():
        return f"cuda:{int(device_id or 0)}"
    return "cpu"


def _positional(function, call):
    args = call.args
    if len(args) == 2 and isinstance(args[1], list) and function in _INDEXERS:
        args = [args[0], tuple(args[1])]  # the dump stores an index tuple as a list
    return args


def call_api(function, call, inplace):
    """Call `function` with CallArgs `call` as run_ut does (index tuples restored, leaves of in-place ops copied)."""
    args = _positional(function, call)
    if inplace and call.leaves:
        # an in-place op may not write into a leaf that requires grad: give it a differentiable copy
        leaf_ids = {id(leaf) for leaf in call.leaves}
        args = [a.clone() if isinstance(a, torch.Tensor) and id(a) in leaf_ids else a for a in args]
    return function(*args, **call.kwargs)


def _recorded_dtypes(node):
    return {str(d.get("dtype")) for d in tensor_descriptors(node)}


def autocast_dtype(record):
    """The 16-bit dtype a call ran in under autocast, else None: a floating input recorded in float32
    and a floating output in float16/bfloat16 (a plain call of an op that autocast lowers keeps its
    inputs' dtype)."""
    inputs = _recorded_dtypes([record.get("input_args"), record.get("input_kwargs")])
    outputs = _recorded_dtypes(record.get("output"))
    low = [name for name in ("torch.float16", "torch.bfloat16") if name in outputs]
    if "torch.float32" in inputs and len(low) == 1 and "torch.float32" not in outputs:
        return getattr(torch, low[0].rsplit(".", 1)[-1])
    return None


def _widened(value, low):
    """The bench inputs of an autocast call: every floating tensor (in lists and dicts too) rounded to
    `low`, as autocast casts it, and computed in float64; gradients pass the rounding unchanged, so the
    bench's input gradients are float64 sums, not rounded ones."""
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        wide = value.to(torch.float64)
        return wide + (value.detach().to(low).to(torch.float64) - wide.detach())
    if isinstance(value, (list, tuple)):
        return type(value)(_widened(item, low) for item in value)
    if isinstance(value, dict):
        return {key: _widened(item, low) for key, item in value.items()}
    return value


def _as_numpy(value):
    if isinstance(value, torch.Tensor):
        value = value.detach().to("cpu")
        if value.dtype.is_complex:
            raise UnsupportedError("complex output is not checked")
        return (value.to(torch.float64) if value.is_floating_point() else value).numpy()
    return np.asarray(value, dtype=np.float64)


def _dtype_text(value):
    return str(value.dtype) if isinstance(value, torch.Tensor) else type(value).__name__


def _compare(row_prefix, device_values, bench_values, computed_in=None):
    """Detail rows; `computed_in`: the dtype an autocast call computed in (its float32 results, such as
    a float32 weight's gradient, carry that dtype's accuracy and are judged by its standard)."""
    if len(device_values) != len(bench_values):
        return [{"name": f"{row_prefix}.0", "status": ERROR,
                 "message": f"{len(device_values)} outputs on device, {len(bench_values)} on bench"}]
    rows = []
    for index, (tested, bench) in enumerate(zip(device_values, bench_values)):
        name = f"{row_prefix}.{index}"
        if tested is None or bench is None:
            continue
        rounded, judged = None, _dtype_text(tested)
        if isinstance(tested, torch.Tensor) and isinstance(bench, torch.Tensor) and tested.is_floating_point():
            low = computed_in if computed_in is not None and tested.dtype == torch.float32 else tested.dtype
            rounded, judged = _as_numpy(bench.detach().to(low)), str(low)
        row = check_output(name, _as_numpy(tested), _as_numpy(bench), judged, rounded)
        shape = list(tested.shape) if isinstance(tested, torch.Tensor) else []
        row.update(name=name, bench_dtype=_dtype_text(bench), tested_dtype=_dtype_text(tested), shape=str(shape))
        rows.append(row)
    return rows


def run_backward(outputs, grads):
    """Backpropagate `grads` (same shapes as `outputs`) into the leaves. Calls the autograd engine the
    way torch.autograd.backward does, minus its gradient-shape check: that check imports sympy on first
    use (0.3-0.8 s, paid again by every multi_run_ut worker); the engine checks shapes itself."""
    engine_run = getattr(torch.autograd.graph, "_engine_run_backward", None)
    if engine_run is None:
        torch.autograd.backward(outputs, grads)
        return
    engine_run(tuple(outputs), tuple(grads), False, False, (), allow_unreachable=True, accumulate_grad=True)


class TorchOps:
    """`FrameworkOps` of PyTorch: `function` replaces the resolved API (op_generate scripts); `seed`
    replaces the name-based seed of random inputs. The tested side's call is sized first (replay_guard):
    no tensor it makes may exceed max(`size_cap`, its largest tensor argument) elements."""

    failing_statuses = (ERROR, WARNING)
    empty_forward_status = SKIP
    size_cap = MAX_MADE_ELEMENTS

    def __init__(self, function=None, seed=None):
        self.function, self.seed = function, seed

    def resolve(self, case):
        return self.function or resolve_api(case.prefix, case.api)

    def build_inputs(self, case, settings):
        with_grad = case.backward is not None
        device_call = build_call_args(case.forward, case.name, settings.get("tensor_dir"),
                                      settings.get("device", "cpu"), with_grad, self.seed)
        return SideRun(device_call), SideRun(bench_copy(device_call)), with_grad

    def forward(self, case, function, side, with_grad, is_bench):
        torch.default_generator.manual_seed(0)  # CPU generator only: seeding CUDA costs more than most ops
        low = autocast_dtype(case.forward)
        if not is_bench:  # the tested side runs first: sized before anything runs, the bench the same call
            check_replayed_call(function, _positional(function, side.inputs), side.inputs.kwargs, self.size_cap,
                                case.name)
        if low is None:
            side.outputs = flatten_tensors(call_api(function, side.inputs, is_inplace(case.api)))
        elif is_bench:
            side.outputs = flatten_tensors(call_api(lambda *a, **k: function(*_widened(a, low), **_widened(k, low)),
                                                 side.inputs, is_inplace(case.api)))
        else:
            device = side.inputs.args[0].device.type if side.inputs.args and isinstance(
                side.inputs.args[0], torch.Tensor) else "cpu"
            with torch.autocast(device, dtype=low):
                side.outputs = flatten_tensors(call_api(function, side.inputs, is_inplace(case.api)))
            side.state = low

    def backward(self, case, settings, tested, bench):
        grads = build_grads(case.backward, case.name, tested.outputs, settings.get("tensor_dir"), self.seed)
        return self.backward_with(grads, tested, bench)

    @staticmethod
    def backward_with(grads, tested, bench):
        """Backward of both sides from the output gradients `grads` (None where an output gets none)."""
        differentiable = [g is not None and isinstance(o, torch.Tensor) and o.requires_grad
                          for o, g in zip(tested.outputs, grads)]
        if not any(differentiable) or not tested.inputs.leaves:
            return "no differentiable output or input"
        pairs = [(o, g) for o, g, keep in zip(tested.outputs, grads, differentiable) if keep]
        bench_pairs = [(ob, g.detach().to("cpu").to(ob.dtype))
                       for ob, g, keep in zip(bench.outputs, grads, differentiable) if keep]
        run_backward([o for o, _ in pairs], [g for _, g in pairs])
        run_backward([o for o, _ in bench_pairs], [g for _, g in bench_pairs])
        tested.grads = [leaf.grad for leaf in tested.inputs.leaves]
        bench.grads = [leaf.grad for leaf in bench.inputs.leaves]
        return ""

    def compare(self, prefix, tested, bench, tested_side, bench_side):
        return _compare(prefix, tested, bench, tested_side.state if isinstance(tested_side.state, torch.dtype) else None)

    def save_error_data(self, folder, case, tested, bench):
        call = tested.inputs
        groups = {"input": flatten_tensors(call.args) + flatten_tensors(list(call.kwargs.values())),
                  "output.device": tested.outputs, "output.bench": bench.outputs}
        save_error_arrays(folder, case.name, groups, "pt", _save_tensor)


def _save_tensor(value, path):
    if not isinstance(value, torch.Tensor):
        return False
    torch.save(value.detach().to("cpu"), path)
    return True


def run_case(case, settings, function=None, seed=None):
    """Outcome dict of one ApiCase (see msprobe.core.run_ut.report.ResultWriter.write).
    `function` replaces the resolved API (op_generate scripts); `seed` replaces the name-based seed."""
    return run_checked_case(case, settings, TorchOps(function, seed))


def make_executor(settings):
    """Executor factory: settings {'device_id' (or 'device'), 'tensor_dir', 'error_data_dir', 'threads'}
    -> execute(case)."""
    if settings.get("threads"):
        torch.set_num_threads(int(settings["threads"]))
    settings = dict(settings, device=settings.get("device") or device_for(settings.get("device_id", 0)))
    return executor_factory(TorchOps(), settings)
