"""The MindSpore side of free_benchmark (PyNative): the same operations as the torch one, on mindspore.Tensor.

Perturbed inputs are built on the host with numpy (float16/float32/float64 bits exactly; bfloat16 through
float32, which holds every bfloat16 value) and turned back into tensors of the original dtype.
bit_noise is not available for bfloat16 (numpy has no 16-bit view of it), as documented for 1.2.1.
Fix mode returns a new output computed from the raised inputs (casts are differentiable, so the
gradient flows through the high-precision computation).
"""
import numpy as np

from msprobe.core.free_benchmark import judge
from msprobe.core.free_benchmark.fuzz_ops import FuzzOps

__all__ = ["MindSporeFuzzOps"]

_NOISE = {"Float16": 1e-6, "BFloat16": 1e-4, "Float32": 1e-8, "Float64": 1e-16}
_MANTISSA_BITS = {"Float16": 10, "BFloat16": 7, "Float32": 23, "Float64": 52}
_LOW = ("Float16", "BFloat16")


def _ms():
    import mindspore
    return mindspore


def _is_float(value):
    ms = _ms()
    return isinstance(value, ms.Tensor) and str(value.dtype) in _MANTISSA_BITS


def _map(value, fn):
    if isinstance(value, _ms().Tensor):
        return fn(value)
    if isinstance(value, (tuple, list)):
        return type(value)(_map(v, fn) for v in value) if type(value) in (tuple, list) else value
    if isinstance(value, dict):
        return {k: _map(v, fn) for k, v in value.items()}
    return value


def _first_float(value):
    if _is_float(value):
        return value if value.size > 0 else None
    items = value if isinstance(value, (tuple, list)) else value.values() if isinstance(value, dict) else ()
    for item in items:
        found = _first_float(item)
        if found is not None:
            return found
    return None


def _host(tensor):
    """float64-or-float32 numpy copy of a float tensor (bfloat16 through float32)."""
    dtype = str(tensor.dtype)
    if dtype == "BFloat16":
        return tensor.astype(_ms().float32).asnumpy()
    return tensor.asnumpy().copy()


def _back(array, like):
    ms = _ms()
    if str(like.dtype) == "BFloat16":
        return ms.Tensor(array.astype(np.float32)).astype(ms.bfloat16)
    return ms.Tensor(array, like.dtype)


def add_noise(tensor):
    dtype = str(tensor.dtype)
    eps = _NOISE[dtype]
    work = _host(tensor).astype(np.float64 if dtype == "Float64" else np.float32)
    _, exponent = np.frexp(work)
    ulp = np.ldexp(np.ones_like(work), exponent - 1 - _MANTISSA_BITS[dtype])
    noisy = np.where(np.abs(work) > np.sqrt(eps), work + np.maximum(ulp, eps).astype(work.dtype), work)
    return _back(noisy.astype(_host(tensor).dtype), tensor)


def bit_noise(tensor):
    dtype = str(tensor.dtype)
    if dtype == "BFloat16":
        return None
    data = _host(tensor)
    bits = data.view({2: np.int16, 4: np.int32, 8: np.int64}[data.itemsize])
    flipped = np.where(np.abs(data) > np.finfo(data.dtype).tiny, bits ^ 1, bits)
    return _back(flipped.view(data.dtype), tensor)


def change_value(tensor):
    data = _host(tensor)
    if data.ndim == 0 or data.size < 2:
        return None
    changed = data.copy()
    if data.ndim == 1:
        changed[0], changed[-1] = data[-1], data[0]
    else:
        changed[0][0], changed[-1][-1] = data[-1][-1].copy(), data[0][0].copy()
    return _back(changed, tensor)


_ONE_INPUT = {"add_noise": add_noise, "bit_noise": bit_noise, "change_value": change_value}


class MindSporeFuzzOps(FuzzOps):
    ONE_INPUT = _ONE_INPUT
    first_float = staticmethod(_first_float)
    map_tensors = staticmethod(_map)
    framework = "mindspore"

    @staticmethod
    def snapshot(args, kwargs):
        return _map(args, lambda t: t.copy()), _map(kwargs, lambda t: t.copy())

    @staticmethod
    def has_work(args, kwargs, mode, bench_dtype="float32"):
        """Whether `perturb` would change anything (checked before an in-place API's inputs are copied)."""
        if mode in ("improve_precision", "to_cpu"):
            return MindSporeFuzzOps.raise_precision(args, kwargs, bench_dtype) is not None
        return _first_float((args, kwargs)) is not None


    @staticmethod
    def raise_precision(args, kwargs, bench_dtype="float32", to_cpu=False):
        ms = _ms()
        bench = ms.float64 if bench_dtype == "float64" else ms.float32
        raised = []

        def convert(tensor):
            dtype = str(tensor.dtype)
            if dtype in _MANTISSA_BITS and dtype != str(bench) and (bench == ms.float64 or dtype in _LOW):
                raised.append(tensor)
                return tensor.astype(bench)
            return tensor

        new = _map(args, convert), _map(kwargs, convert)
        return new if raised else None

    @staticmethod
    def run(function, args, kwargs):
        ms = _ms()
        no_grad = getattr(ms, "_no_grad", None)
        if no_grad is None:
            return function(*args, **kwargs)
        with no_grad():
            return function(*args, **kwargs)

    @staticmethod
    def float_outputs(output):
        if _is_float(output):
            return [(None, output)]
        if isinstance(output, (tuple, list)):
            return [(i, t) for i, t in enumerate(output) if _is_float(t)]
        return []

    @staticmethod
    def element(output, index):
        if index is None:
            return output if _is_float(output) else None
        if isinstance(output, (tuple, list)) and index < len(output) and _is_float(output[index]):
            return output[index]
        return None

    @staticmethod
    def compare(original, perturbed, tol, noise_eps=None):
        wide = np.float64 if "Float64" in (str(original.dtype), str(perturbed.dtype)) else np.float32
        return judge.compare_outputs(_host(original).astype(wide), _host(perturbed).astype(wide), tol, noise_eps)

    @staticmethod
    def describe(tensor):
        return str(tensor.dtype), str(tuple(tensor.shape))

    @staticmethod
    def fixed_output(function, args, kwargs, output, mode="improve_precision", bench_dtype="float32"):
        """Fix mode: the API on raised inputs, cast back to each output's dtype (with autograd)."""
        raised = MindSporeFuzzOps.raise_precision(args, kwargs, bench_dtype)
        if raised is None:
            return output
        better = function(*raised[0], **raised[1])
        if _is_float(output) and _is_float(better):
            return better.astype(output.dtype)
        if isinstance(output, (tuple, list)) and isinstance(better, (tuple, list)) and len(better) == len(output):
            return type(output)(b.astype(o.dtype) if _is_float(o) and _is_float(b) else o
                                for o, b in zip(output, better))
        return output

    @staticmethod
    def watch_backward(output, function, args, kwargs, perturbed, on_grads):
        """Backward stage, at once (MindSpore's autograd is functional: no hook on the output's gradient):
        gradients of sum(output) w.r.t. the float positional inputs, for the original and perturbed inputs."""
        originals, changed = _grads(function, args, kwargs), _grads(function, perturbed[0], perturbed[1])
        if originals is not None and changed is not None and len(originals) == len(changed):
            on_grads(originals, changed)
        return []


def _grads(function, args, kwargs):
    ms = _ms()
    positions = [i for i, arg in enumerate(args) if _is_float(arg)]
    if not positions:
        return None

    def summed(*floats):
        full = list(args)
        for position, value in zip(positions, floats):
            full[position] = value
        out = function(*full, **kwargs)
        first = out if _is_float(out) else next((o for o in out if _is_float(o)), None) \
            if isinstance(out, (tuple, list)) else None
        return first.sum()

    grads = ms.grad(summed, grad_position=tuple(range(len(positions))))(*[args[i] for i in positions])
    return list(grads) if isinstance(grads, (tuple, list)) else [grads]
