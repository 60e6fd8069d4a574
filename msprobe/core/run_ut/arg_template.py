"""Turn a recorded call (input_args / input_kwargs of dump.json) into a framework-free template.

Tensors become `TensorSlot`s numbered in argument order, other recorded values `ValueSlot`s; `fill`
then builds real arguments for any framework from per-slot tensors and a scalar converter. This lets
one recorded call be rebuilt twice (tested framework and bench framework) from the same numpy data.
"""
import os
from dataclasses import dataclass

import numpy as np

from msprobe.core.errors import UnsupportedError
from msprobe.core.naming import is_tensor_descriptor
from msprobe.core.run_ut.random_data import random_values

__all__ = ["TensorSlot", "ValueSlot", "CallTemplate", "template_of", "fill", "slot_arrays", "plain_scalar",
           "tensor_file_path"]



@dataclass(frozen=True)
class TensorSlot:
    index: int


@dataclass(frozen=True)
class ValueSlot:
    record: dict


@dataclass
class CallTemplate:
    args: list
    kwargs: dict
    tensors: list  # the tensor records, indexed by TensorSlot.index


def template_of(record):
    """CallTemplate of a forward record."""
    tensors = []

    def walk(node):
        if isinstance(node, list):
            return [walk(item) for item in node]
        if is_tensor_descriptor(node):
            tensors.append(node)
            return TensorSlot(len(tensors) - 1)
        if isinstance(node, dict) and "type" not in node:
            return {key: walk(value) for key, value in node.items()}
        return None if node is None else ValueSlot(node)

    args = walk(record.get("input_args") or [])
    kwargs = {key: walk(value) for key, value in (record.get("input_kwargs") or {}).items()}
    return CallTemplate(args, kwargs, tensors)


def fill(node, tensors, scalar):
    """Replace slots: TensorSlot i -> tensors[i], ValueSlot -> scalar(record)."""
    if isinstance(node, TensorSlot):
        return tensors[node.index]
    if isinstance(node, ValueSlot):
        return scalar(node.record)
    if isinstance(node, list):
        return [fill(item, tensors, scalar) for item in node]
    if isinstance(node, dict):
        return {key: fill(value, tensors, scalar) for key, value in node.items()}
    return node


def tensor_file_path(tensor_dir, name):
    """The file of a record's `data_name`: a plain file name inside `tensor_dir` (a crafted dump.json may
    not reach '../secret' or '/etc/passwd'); UnsupportedError (that API's SKIP row) otherwise."""
    if not isinstance(name, str) or os.path.basename(name) != name or name in ("", ".", "..") or "\0" in name:
        raise UnsupportedError(f"data_name {str(name)[:80]!r} is not a file name inside {tensor_dir}")
    path = os.path.join(tensor_dir, name)
    if not os.path.isfile(path):
        raise UnsupportedError(f"tensor file {name} is missing from {tensor_dir}")
    return path


def slot_arrays(records, rng, load):
    """numpy arrays for tensor records: `load(record)` for records with data_name (real data) when
    `load` is given, else seeded random values from the statistics."""
    arrays = []
    for record in records:
        if load is not None and record.get("data_name"):
            arrays.append(np.asarray(load(record)))
        else:
            arrays.append(random_values(record, rng))
    return arrays


def plain_scalar(record):
    """Value of int/float/bool/str/slice/ellipsis records; None when the type needs a framework."""
    kind, value = record.get("type"), record.get("value")
    if kind in ("int", "float", "bool", "str"):
        return value
    if kind == "slice":
        return slice(*value)
    if kind in ("ellipsis", "Ellipsis"):
        return Ellipsis
    return None
