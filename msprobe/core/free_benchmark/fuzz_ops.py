"""The perturbation flow free_benchmark shares between frameworks; each framework supplies the tensor work.

A framework's ops class subclasses `FuzzOps` and provides `raise_precision(args, kwargs, bench_dtype,
to_cpu)`, `first_float(value)` (the first floating tensor inside args/kwargs), `map_tensors(value, fn)`
(a copy of nested args with fn applied to every tensor) and `ONE_INPUT` (pert_mode -> function of one
tensor returning the perturbed tensor or None).
"""
import abc
from typing import Any, Callable, Dict, Optional, Tuple

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
