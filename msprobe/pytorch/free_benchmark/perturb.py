"""The torch side of free_benchmark: perturb an API's inputs, run it again, compare, fix, check backward.

`TorchFuzzOps` is what the framework-neutral task (msprobe/core/dump/tasks/free_benchmark.py) calls:

    snapshot(args, kwargs)                     detached copies (inputs of an in-place API, before it runs)
    perturb(args, kwargs, mode, bench_dtype)   perturbed copies, or None when there is nothing to perturb
    run(function, args, kwargs)                the API again, without autograd, never in place on user data
    float_outputs(output)                      [(index or None, tensor)] of the floating outputs
    compare(original, perturbed, tol)          (ratio, flipped) by msprobe.core.free_benchmark.judge
    fixed_output(function, args, kwargs, ...)  fix mode: the better values go into the user's tensors
    watch_backward(...)                        backward stage: re-run forward and backward at grad time

Perturbations (first floating input only, except improve_precision / to_cpu which convert every one):
add_noise adds max(eps, one ulp of the element's dtype) to elements with |x| > sqrt(eps), so the noise
is never rounded away (1.2.1 adds eps, which fp16 absorbs for |x| >= 2^-8); bit_noise flips the lowest
mantissa bit of normal elements; change_value swaps the first and last element ([0][0] and [-1][-1]).
"""
import math

import torch

from msprobe.core.free_benchmark import judge
from msprobe.core.free_benchmark.fuzz_ops import FuzzOps

__all__ = ["TorchFuzzOps"]

_LOW = (torch.float16, torch.bfloat16)
_MANTISSA_BITS = {torch.float16: 10, torch.bfloat16: 7, torch.float32: 23, torch.float64: 52}
_NOISE = {torch.float16: 1e-6, torch.bfloat16: 1e-4, torch.float32: 1e-8, torch.float64: 1e-16}
_BITS_AS = {torch.float16: torch.int16, torch.bfloat16: torch.int16, torch.float32: torch.int32,
            torch.float64: torch.int64}
_BENCH = {"float32": torch.float32, "float64": torch.float64}


def _map(value, fn):
    """`value` with every tensor replaced by fn(tensor) (tuples, lists and dicts walked)."""
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, (tuple, list)):
        mapped = [_map(v, fn) for v in value]
        return type(value)(mapped) if isinstance(value, list) or type(value) is tuple else tuple(mapped)
    if isinstance(value, dict):
        return {k: _map(v, fn) for k, v in value.items()}
    return value


def _any_tensor(value, test):
    if isinstance(value, torch.Tensor):
        return test(value)
    if isinstance(value, (tuple, list)):
        return any(_any_tensor(v, test) for v in value)
    if isinstance(value, dict):
        return any(_any_tensor(v, test) for v in value.values())
    return False


def _first_float(value):
    if isinstance(value, torch.Tensor):
        return value if value.is_floating_point() and value.numel() > 0 else None
    if isinstance(value, (tuple, list)):
        values = value
    elif isinstance(value, dict):
        values = value.values()
    else:
        return None
    for item in values:
        found = _first_float(item)
        if found is not None:
            return found
    return None


def add_noise(tensor):
    """tensor + max(eps, ulp(tensor)) where |x| > sqrt(eps), in the tensor's own dtype."""
    dtype = tensor.dtype
    eps = _NOISE.get(dtype, 1e-8)
    work = tensor.detach().to(torch.float64 if dtype == torch.float64 else torch.float32)
    _, exponent = torch.frexp(work)
    ulp = torch.ldexp(torch.ones_like(work), exponent - 1 - _MANTISSA_BITS.get(dtype, 23))
    noisy = work + ulp.clamp(min=eps)
    return torch.where(work.abs() > math.sqrt(eps), noisy, work).to(dtype)


def bit_noise(tensor):
    """The lowest mantissa bit of every normal element flipped."""
    dtype = tensor.dtype
    data = tensor.detach().contiguous()
    bits = data.view(_BITS_AS[dtype])
    flipped = torch.where(data.abs() > torch.finfo(dtype).tiny, bits ^ 1, bits)
    return flipped.view(dtype)


def change_value(tensor):
    """First and last element ([0][0] and [-1][-1] of a matrix or higher) swapped; None for < 2 elements."""
    if tensor.dim() == 0 or tensor.shape[0] < 2 and tensor.numel() < 2:
        return None
    changed = tensor.detach().clone()
    if changed.dim() == 1:
        changed[0], changed[-1] = tensor[-1].detach(), tensor[0].detach()
    else:
        first = tensor[0][0].detach().clone()
        changed[0][0] = tensor[-1][-1].detach()
        changed[-1][-1] = first
    return changed


_ONE_INPUT = {"add_noise": add_noise, "bit_noise": bit_noise, "change_value": change_value}


class TorchFuzzOps(FuzzOps):
    ONE_INPUT = _ONE_INPUT
    first_float = staticmethod(_first_float)
    map_tensors = staticmethod(_map)
    framework = "pytorch"

    @staticmethod
    def snapshot(args, kwargs):
        return _map(args, lambda t: t.detach().clone()), _map(kwargs, lambda t: t.detach().clone())

    @staticmethod
    def has_work(args, kwargs, mode, bench_dtype="float32"):
        """Whether `perturb` would change anything (checked before an in-place API's inputs are copied)."""
        if mode == "improve_precision":
            wanted = (torch.float16, torch.bfloat16, torch.float32) if bench_dtype == "float64" else _LOW
            return _any_tensor((args, kwargs), lambda t: t.dtype in wanted)
        if mode == "to_cpu":
            return _any_tensor((args, kwargs), lambda t: True)
        return _first_float((args, kwargs)) is not None


    @staticmethod
    def raise_precision(args, kwargs, bench_dtype="float32", to_cpu=False):
        """Every float tensor below `bench_dtype` cast up (and all tensors moved to CPU with to_cpu);
        None when nothing changes (improve_precision of an API without low-precision inputs)."""
        bench = _BENCH[bench_dtype]
        raised = []

        def convert(tensor):
            target = tensor.detach()
            if tensor.is_floating_point() and tensor.dtype != bench and (bench == torch.float64 or
                                                                         tensor.dtype in _LOW):
                raised.append(tensor)
                target = target.to(bench)
            return target.cpu() if to_cpu else target

        new_args, new_kwargs = _map(args, convert), _map(kwargs, convert)
        if not raised and not to_cpu:
            return None
        return new_args, new_kwargs

    @staticmethod
    def run(function, args, kwargs):
        if isinstance(kwargs, dict) and kwargs.get("inplace") is True:
            kwargs = dict(kwargs, inplace=False)
        with torch.no_grad():
            return function(*args, **kwargs)

    @staticmethod
    def float_outputs(output):
        if isinstance(output, torch.Tensor):
            return [(None, output)] if output.is_floating_point() else []
        if isinstance(output, (tuple, list)):
            return [(i, t) for i, t in enumerate(output) if isinstance(t, torch.Tensor) and t.is_floating_point()]
        return []

    @staticmethod
    def element(output, index):
        if index is None:
            return output if isinstance(output, torch.Tensor) else None
        if isinstance(output, (tuple, list)) and index < len(output) and isinstance(output[index], torch.Tensor):
            return output[index]
        return None

    @staticmethod
    def compare(original, perturbed, tol, noise_eps=None):
        common = torch.float64 if torch.float64 in (original.dtype, perturbed.dtype) else torch.float32
        a, b = original.detach(), perturbed.detach()
        if a.device != b.device:
            a, b = a.cpu(), b.cpu()
        return judge.compare_outputs(a.to(common), b.to(common), tol, noise_eps)

    @staticmethod
    def describe(tensor):
        return str(tensor.dtype), str(tensor.shape)

    @staticmethod
    def replace(output, index, better):
        """Fix mode: the better values, cast back, written into the user's output tensor (its identity,
        autograd graph and storage stay; later ops and the backward see the better values)."""
        original = TorchFuzzOps.element(output, index)
        if original is None or better is None or tuple(better.shape) != tuple(original.shape):
            return False
        original.data.copy_(better.detach().to(device=original.device, dtype=original.dtype))
        return True

    @staticmethod
    def fixed_output(function, args, kwargs, output, mode="improve_precision", bench_dtype="float32"):
        """Fix mode: the API on raised (or CPU) inputs; its values go into the user's output tensors."""
        better = TorchFuzzOps.perturb(args, kwargs, mode, bench_dtype)
        if better is None:
            return output
        result = TorchFuzzOps.run(function, *better)
        for index, _ in TorchFuzzOps.float_outputs(output):
            TorchFuzzOps.replace(output, index, TorchFuzzOps.element(result, index))
        return output

    @staticmethod
    def watch_backward(output, function, args, kwargs, perturbed, on_grads):
        """Backward stage: when the gradient of `output` arrives, compute the gradients w.r.t. the float
        inputs twice (original inputs, perturbed inputs) and pass both lists to on_grads. Returns the
        hook handles (removed by the task at the step's end)."""
        outputs = TorchFuzzOps.float_outputs(output)
        watched = [(i, t) for i, t in outputs if t.requires_grad]
        if len(watched) != 1:  # one differentiable output: its gradient alone drives the re-runs
            return []
        index, tensor = watched[0]

        def on_grad(grad):
            with torch._C.DisableTorchFunction():  # not recorded by the dump's function mode
                originals = _grads_of(function, args, kwargs, index, grad)
                changed = _grads_of(function, perturbed[0], perturbed[1], index, grad)
            if originals is not None and changed is not None:
                on_grads(originals, changed)

        return [tensor.register_hook(on_grad)]


def _grads_of(function, args, kwargs, index, grad):
    """Gradients w.r.t. the float tensors of args/kwargs of function(*args)[index] given `grad`."""
    leaves = []

    def leaf(tensor):
        if tensor.is_floating_point():
            tensor = tensor.detach().requires_grad_(True)
            leaves.append(tensor)
        return tensor

    args, kwargs = _map(args, leaf), _map(kwargs, leaf)
    if not leaves:
        return None
    with torch.enable_grad():
        output = function(*args, **kwargs)
        output = output if index is None else output[index]
        if not isinstance(output, torch.Tensor) or not output.requires_grad:
            return None
        grads = torch.autograd.grad(output, leaves, grad.to(device=output.device, dtype=output.dtype),
                                    allow_unused=True)
    return list(grads)
