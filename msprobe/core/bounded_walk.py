"""One bounded walk over what a reader builds: unpickled checkpoints, JSON, YAML and config_check packs.

A small file can describe a huge structure: shared references (`x = {"a": x, "b": x}` pickled, a YAML alias
bomb) double at every level once something walks them, and `[{}, {}, ...]` is 3 bytes of JSON per 64-byte dict.
Every reader therefore walks what it loaded through one `Walk` holding a `Budget`:

    walk = Walk(path, Budget.for_input(os.path.getsize(path)))
    for keys, leaf in walk.leaves(loaded):    # shared references counted each time they are reached
        ...

- nodes: containers and leaves visited, a shared reference counted every time it is reached, so breadth after
  expansion is bounded, not just depth. An honest input spends at least a byte per node it describes
  (`Budget.for_input` allows a floor plus one node per input byte, under an absolute cap).
- elements: items a reader materialises from the walk (flattened keys, rows).
- output_bytes: bytes a writer produces from them (`Walk.emit`).
- depth: nesting.
JSON text is bounded before it is parsed (`loads_json`): the values it can hold are counted from its
separators, so `json.loads` never builds what the budget refuses. Tensor readers compare the bytes a shape needs
with the bytes present in exact integer arithmetic (`tensor_bytes`, `check_tensor_bytes`) before they allocate.
An input over budget is one line naming the file and the budget (`OverBudget`).
"""
import json
import math
import re
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable, Iterator, Optional, Sequence, Tuple, Union

from msprobe.core.errors import ParseError

__all__ = ["Budget", "OverBudget", "Walk", "check_json_text", "json_values", "loads_json", "tensor_bytes", "check_tensor_bytes",
           "DEFAULT_BUDGET", "Children"]

Children = Callable[[Any], Optional[Iterable[Tuple[Any, Any]]]]


class OverBudget(ParseError):
    """An input describes more than its reader's budget allows (one line: the file and the budget)."""


@dataclass(frozen=True)
class Budget:
    nodes: int = 8_000_000
    elements: int = 2_000_000
    output_bytes: int = 512 * 1024 * 1024
    depth: int = 64

    def for_input(self, input_bytes: int, floor: int = 100_000) -> "Budget":
        """This budget with `nodes` cut to `floor` + one per input byte: an input without shared references
        never needs more; one whose references multiply (a pickle or YAML bomb) trips early."""
        return replace(self, nodes=min(self.nodes, floor + max(0, int(input_bytes))))


DEFAULT_BUDGET = Budget()


def _describe(budget_name: str, limit: int) -> str:
    return f"{limit:,} {budget_name}"


def _default_children(value) -> Optional[Iterable[Tuple[Any, Any]]]:
    if isinstance(value, dict):
        return value.items()
    if isinstance(value, (list, tuple)):
        return enumerate(value)
    return None


class Walk:
    """Counts what one reader visits, materialises and writes for one input; over a budget raises OverBudget."""

    def __init__(self, where: str, budget: Budget = DEFAULT_BUDGET):
        self.where, self.budget = str(where), budget
        self.nodes = self.elements = self.output_bytes = 0

    def _over(self, what: str, limit: int, detail: str = "") -> OverBudget:
        return OverBudget(f"{self.where} describes more than its reader's budget of {_describe(what, limit)}"
                          f"{detail}: refused (shared references count each time they are reached).")

    def visit(self, count: int = 1) -> None:
        self.nodes += count
        if self.nodes > self.budget.nodes:
            raise self._over("nodes visited", self.budget.nodes)

    def visit_json(self, data: Union[str, bytes]) -> None:
        """Count the values JSON text `data` can hold, before it is parsed."""
        self.visit(json_values(data, self.budget.nodes - self.nodes))

    def materialise(self, count: int = 1) -> None:
        self.elements += count
        if self.elements > self.budget.elements:
            raise self._over("elements materialised", self.budget.elements)

    def emit(self, nbytes: int) -> None:
        self.output_bytes += nbytes
        if self.output_bytes > self.budget.output_bytes:
            raise self._over("output bytes", self.budget.output_bytes)

    def leaves(self, value: Any, children: Children = _default_children,
               prefix: Tuple[Any, ...] = ()) -> Iterator[Tuple[Tuple[Any, ...], Any]]:
        """(keys from the root, leaf) of every leaf under `value`, depth first in container order; `children`
        gives a container's (key, item) pairs, None for a leaf. Each leaf counts one element."""
        stack = [(prefix, value)]
        while stack:
            keys, item = stack.pop()
            self.visit()
            if len(keys) - len(prefix) > self.budget.depth:
                raise self._over("levels of nesting", self.budget.depth, f" at '{_joined(keys)[:120]}'")
            pairs = children(item)
            if pairs is None:
                self.materialise()
                yield keys, item
                continue
            stack.extend(reversed([(keys + (key,), child) for key, child in pairs]))

    def check(self, value: Any, children: Children = _default_children) -> int:
        """Walk all of `value` (nothing is yielded): the nodes it holds once its references are expanded."""
        before = self.nodes
        stack = [(0, value)]
        while stack:
            depth, item = stack.pop()
            self.visit()
            if depth > self.budget.depth:
                raise self._over("levels of nesting", self.budget.depth)
            pairs = children(item)
            if pairs is not None:
                stack.extend((depth + 1, child) for _key, child in pairs)
        return self.nodes - before


def _joined(keys: Sequence[Any]) -> str:
    return ".".join(str(key) for key in keys)


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_JSON_STRING_BYTES = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)


def _json_values(data: Union[str, bytes]) -> int:
    """An upper bound of the values (and keys) JSON text holds: one per separator or opening bracket, plus one."""
    if isinstance(data, str):
        return data.count(",") + data.count(":") + data.count("[") + data.count("{") + 1
    return data.count(b",") + data.count(b":") + data.count(b"[") + data.count(b"{") + 1


def json_values(data: Union[str, bytes], limit: int) -> int:
    """An upper bound of the values and keys JSON text `data` holds, exact enough to compare with `limit`:
    separators inside strings are left out when counting them in would pass `limit`."""
    count = _json_values(data)
    if count <= limit:
        return count
    if isinstance(data, str):
        return _json_values(_JSON_STRING.sub('""', data))
    return _json_values(_JSON_STRING_BYTES.sub(b'""', data))


def check_json_text(data: Union[str, bytes], where: str, budget: Budget = DEFAULT_BUDGET) -> None:
    """OverBudget when JSON text `data` can hold more values than `budget.nodes`, before anything is parsed."""
    Walk(where, budget).visit_json(data)


def loads_json(data: Union[str, bytes], where: str, budget: Budget = DEFAULT_BUDGET) -> Any:
    """json.loads of `data` after `check_json_text`; malformed, too deep or over budget: one ParseError line
    naming `where`."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    check_json_text(raw, where, budget)
    try:
        return json.loads(raw.decode("utf-8"))
    except RecursionError:
        raise ParseError(f"{where} is nested too deeply to be read (JSON).") from None
    except UnicodeDecodeError:
        raise ParseError(f"{where} is not UTF-8 text.") from None
    except json.JSONDecodeError as exc:
        raise ParseError(f"{where} is not valid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}.") from None
    except ValueError as exc:  # e.g. an integer of more than 4300 digits
        raise ParseError(f"{where} holds a value that cannot be read: {str(exc).splitlines()[0][:200]}") from None


def tensor_bytes(shape: Sequence[Any], itemsize: int) -> int:
    """Bytes a dense tensor of `shape` needs, in exact integer arithmetic (no int64 wrap). A dimension that is
    not a non-negative integer raises ValueError."""
    dims = []
    for dim in shape:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 0:
            raise ValueError(f"dimension {str(dim)[:40]!r} is not a non-negative integer")
        dims.append(dim)
    return math.prod(dims) * int(itemsize)


def check_tensor_bytes(shape: Sequence[Any], itemsize: int, present: int, where: str) -> int:
    """The bytes `shape` needs when they equal `present`; otherwise one ParseError line naming `where`."""
    try:
        needed = tensor_bytes(shape, itemsize)
    except ValueError as exc:
        raise ParseError(f"{where}: shape {_short(shape)} is malformed ({exc}).") from None
    if needed != present:
        raise ParseError(f"{where}: shape {_short(shape)} needs {needed:,} bytes but {present:,} are stored: "
                         "refused before anything is allocated.")
    return needed


def _short(shape: Sequence[Any]) -> str:
    return str(list(shape))[:120]
