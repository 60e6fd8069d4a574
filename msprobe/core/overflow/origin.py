"""NaN origin: which dumped call *produced* an inf/nan and which only passed one on.

    origin = NanOrigin(collector, ignore=["masked_fill:-inf"], raise_at_producer=False)
    role = origin.role(record)     # None (finite, or non-finite only where ignored), "producer",
                                   # "propagator" or "consumer"
    origin.kept(record, role)      # log / raise at the first producer, remember it for nan_origin.json
    origin.step_end()              # {dump_path}/step{N}/rank{R}/nan_origin.json, producers first
    origin.new_step()

Roles, from the statistics of the record's descriptors (Max/Min inf or nan):
  producer    every input finite, some output non-finite (forward: inputs = args/kwargs; backward:
              inputs = the gradients arriving, outputs = the gradients it computes)
  propagator  a non-finite input and a non-finite output
  consumer    a non-finite input, every output finite (an attention softmax after a -inf mask)

Ignore rules (expected infs), each "[part of an API name][:-inf]":
  "masked_fill"        every non-finite value of calls whose name contains masked_fill
  "masked_fill:-inf"   their -inf only (a nan or +inf still counts)
  ":-inf"              -inf in any call (models that fill masks with -inf)
A tensor an ignore rule covers counts as finite, on both sides of every call it reaches.
"""
import math
import os
from typing import Any, List, Optional

from msprobe.core.errors import MsprobeError
from msprobe.core.log import logger
from msprobe.core.paths import atomic_write_json

__all__ = ["NanOrigin", "NaNProducerError", "IgnoreRules", "tensor_kinds", "call_role", "ORIGIN_FILE"]

ORIGIN_FILE = "nan_origin.json"
_INPUT_KEYS = {"forward": ("input_args", "input_kwargs"), "backward": ("input",)}


class NaNProducerError(MsprobeError, FloatingPointError):
    """Raised into the training code at the first producer when raise_at_producer is set."""
    reaches_user = True  # the dump guard lets it through (see msprobe/core/dump/guard.py)


def tensor_kinds(desc) -> set:
    """{"nan", "+inf", "-inf"} found in one tensor descriptor's Max/Min."""
    kinds = set()
    for key in ("Max", "Min"):
        value = desc.get(key)
        if type(value) is float and not math.isfinite(value):
            kinds.add("nan" if value != value else ("+inf" if value > 0 else "-inf"))
    return kinds


def _descriptors(node):
    if isinstance(node, (list, tuple)):
        for item in node:
            yield from _descriptors(item)
    elif isinstance(node, dict):
        if "Max" in node or "Min" in node:
            yield node
        else:
            for item in node.values():
                yield from _descriptors(item)


class IgnoreRules:
    """The ignore list of expected infs (see the module docstring)."""

    def __init__(self, rules: Optional[List[str]] = None) -> None:
        self.rules = []
        for rule in rules or []:
            part, _, only = str(rule).partition(":")
            if only not in ("", "-inf"):
                raise MsprobeError(f"config: ignore rule {rule!r} is not 'NAME', 'NAME:-inf' or ':-inf'.")
            self.rules.append((part, only == "-inf"))

    def non_finite(self, name: str, node) -> bool:
        """Whether `node` (descriptors of one side of the call `name`) holds a non-finite value that no
        rule covers."""
        matching = [only_minus_inf for part, only_minus_inf in self.rules if part in name]
        for desc in _descriptors(node):
            kinds = tensor_kinds(desc)
            if not kinds:
                continue
            if any(not only or kinds == {"-inf"} for only in matching):
                continue
            return True
        return False


def call_role(kind: str, name: str, entry: dict, rules: IgnoreRules) -> Optional[str]:
    """The role (None, "producer", "propagator", "consumer") of one call from its dump entry; `kind` is
    "forward", "backward" or anything else for a parameter's gradient."""
    if kind not in _INPUT_KEYS:  # a parameter's gradient: produced by the backward above it
        return "propagator" if rules.non_finite(name, entry) else None
    inputs = any(rules.non_finite(name, entry.get(key)) for key in _INPUT_KEYS[kind])
    outputs = rules.non_finite(name, entry.get("output"))
    if outputs:
        return "propagator" if inputs else "producer"
    return "consumer" if inputs else None


class NanOrigin:
    def __init__(self, collector: Any, ignore: Optional[List[str]] = None, raise_at_producer: bool = False):
        self.collector = collector
        self.rules = IgnoreRules(ignore)
        self.raise_at_producer = raise_at_producer
        self.calls: List[dict] = []   # this step's kept calls
        self.first_producer: Optional[str] = None

    def role(self, record) -> Optional[str]:
        return call_role(record.kind, record.name, record.entry, self.rules)

    def kept(self, record, role: str) -> None:
        stack = list(record.stack or [])
        self.calls.append({"name": record.name, "role": role, "stack": stack})
        if role != "producer" or self.first_producer is not None:
            return
        self.first_producer = record.name
        where = _call_site(stack)
        message = (f"msprobe: inf/nan first produced by {record.name} (finite inputs, non-finite output)"
                   f"{' at ' + where if where else ''}.")
        logger.warning(message)
        if self.raise_at_producer:
            self.step_end()
            raise NaNProducerError(message)

    def step_end(self) -> None:
        if not self.calls:
            return
        collector = self.collector
        from msprobe.core.dump.writer import rank_dir_name

        calls = sorted(self.calls, key=lambda call: call["role"] != "producer")  # stable: producers first
        folder = os.path.join(collector.config.dump_path, f"step{collector.current_step}",
                              rank_dir_name(collector.rank))
        atomic_write_json(os.path.join(folder, ORIGIN_FILE),
                          {"first_producer": self.first_producer, "calls": calls})

    def new_step(self) -> None:
        self.calls = []


_LIBRARY_PARTS = ("/torch/", "/mindspore/", "/msprobe/")


def _call_site(stack) -> str:
    """The innermost stack.json line outside torch/mindspore/msprobe, on one line."""
    lines = [str(line) for line in stack]
    user = [line for line in lines if not any(part in line.split(",", 1)[0] for part in _LIBRARY_PARTS)]
    chosen = (user or lines or [""])[0]
    return " ".join(chosen.split())
