"""The perturbation flow free_benchmark shares between frameworks; each framework supplies the tensor work.

A framework's ops class subclasses `FuzzOps` and provides `raise_precision(args, kwargs, bench_dtype,
to_cpu)`, `first_float(value)` (the first floating tensor inside args/kwargs), `map_tensors(value, fn)`
(a copy of nested args with fn applied to every tensor), `ONE_INPUT` (pert_mode -> function of one
tensor returning the perturbed tensor or None) and the tensor work the free_benchmark task asks for
(the static methods below: snapshot, has_work, run, float_outputs, element, compare, describe,
fixed_output, watch_backward). The class is used as is, never instantiated; `Framework.perturbation_ops()`
hands it to the task.
"""
import abc
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

# (args, kwargs) of one call
Inputs = Tuple[Any, Any]

__all__ = ["FuzzOps"]


class FuzzOps(abc.ABC):
    ONE_INPUT: Dict[str, Callable[[Any], Any]] = {}

    @classmethod
    def perturb(cls, args, kwargs, mode, bench_dtype="float32") -> Optional[Tuple[Any, Any]]:
        """(args, kwargs) perturbed by `mode`, or None: no floating input (or nothing to raise)."""
        if mode in ("improve_precision", "to_cpu"):
            return cls.raise_precision(args, kwargs, bench_dtype, to_cpu=mode == "to_cpu")
        if mode == "no_change":
            return args, kwargs
        target = cls.first_float((args, kwargs))
        if target is None:
            return None
        perturbed = cls.ONE_INPUT[mode](target)
        if perturbed is None:
            return None

        def swap(tensor):
            return perturbed if tensor is target else tensor
        return cls.map_tensors(args, swap), cls.map_tensors(kwargs, swap)

    @staticmethod
    @abc.abstractmethod
    def raise_precision(args, kwargs, bench_dtype="float32", to_cpu=False):
        """Every float tensor below `bench_dtype` cast up (all moved to CPU with to_cpu); None: nothing changes."""

    @staticmethod
    @abc.abstractmethod
    def first_float(value):
        """The first floating tensor inside nested args, or None."""

    @staticmethod
    @abc.abstractmethod
    def map_tensors(value, fn):
        """A copy of nested args with `fn` applied to every tensor."""

    @staticmethod
    @abc.abstractmethod
    def snapshot(args: Any, kwargs: Any) -> Inputs:
        """Copies of the tensors of args/kwargs (an in-place API overwrites its inputs)."""

    @staticmethod
    @abc.abstractmethod
    def has_work(args: Any, kwargs: Any, mode: str, bench_dtype: str = "float32") -> bool:
        """Whether `mode` would change anything in these inputs (no copy, no re-run otherwise)."""

    @staticmethod
    @abc.abstractmethod
    def run(function: Callable[..., Any], args: Any, kwargs: Any) -> Any:
        """function(*args, **kwargs) without recording autograd history."""

    @staticmethod
    @abc.abstractmethod
    def float_outputs(output: Any) -> List[Tuple[Optional[int], Any]]:
        """[(index or None for a single tensor, tensor)] of the floating tensors of an output."""

    @staticmethod
    @abc.abstractmethod
    def element(output: Any, index: Optional[int]) -> Any:
        """The tensor at `index` of an output (the output itself for index None), or None."""

    @staticmethod
    @abc.abstractmethod
    def compare(original: Any, perturbed: Any, tol: float, noise_eps: Optional[float] = None) -> Tuple[float, bool]:
        """(largest ratio of magnitudes, whether a sign flipped) of two outputs (core/free_benchmark/judge.py);
        `noise_eps`: changes within this many units of the output's own rounding count as agreement (noise modes)."""

    @staticmethod
    @abc.abstractmethod
    def describe(tensor: Any) -> Tuple[str, str]:
        """(dtype name, shape text) of a tensor for the result CSV."""

    @staticmethod
    @abc.abstractmethod
    def fixed_output(function: Callable[..., Any], args: Any, kwargs: Any, output: Any,
                     mode: str = "improve_precision", bench_dtype: str = "float32") -> Any:
        """handler_type fix: the output recomputed at higher precision (or on the CPU), in the output's dtype."""

    @staticmethod
    @abc.abstractmethod
    def watch_backward(output: Any, function: Callable[..., Any], args: Any, kwargs: Any, perturbed: Inputs,
                       on_grads: Callable[[Sequence[Any], Sequence[Any]], None]) -> List[Any]:
        """fuzz_stage backward: hooks (with .remove()) that call on_grads(original, perturbed input gradients)."""
