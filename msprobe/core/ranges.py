"""Step and rank selections (`[0, "4-6"]`) kept as sorted intervals, never expanded into lists.

`"step": ["0-20000000"]` costs two integers, not 20 million list items: membership is a binary
search, `len`, `min` and `max` are arithmetic. Iterating (and indexing) is allowed only for
selections of at most ITER_LIMIT values, so a huge range can never be expanded by accident.

    >>> steps = IndexRanges.parse("step", [0, "4-6"])
    >>> (5 in steps, 3 in steps, len(steps), steps.max(), steps == [0, 4, 5, 6])
    (True, False, 4, 6, True)
"""
import bisect
import re
from typing import Iterator, List, Sequence, Tuple

from msprobe.core.errors import ConfigError

__all__ = ["IndexRanges", "ITER_LIMIT", "MAX_INDEX"]

ITER_LIMIT = 1_000_000
MAX_INDEX = 2 ** 62  # far beyond any step or rank, and len() of any selection still fits a C ssize_t
_RANGE = re.compile(r"\s*(\d{1,20})\s*-\s*(\d{1,20})\s*", re.ASCII)
_ALLOWED = 'a list of integers >= 0 or "start-end" strings with start <= end, e.g. [0, "4-6"]'


def _fail(key, value, allowed=_ALLOWED):
    raise ConfigError(f"config: invalid value {value!r} for '{key}'; allowed: {allowed}.")


class IndexRanges:
    """A set of non-negative integers stored as merged, sorted, inclusive intervals."""

    __slots__ = ("_starts", "_ends", "_count")

    def __init__(self, intervals: Sequence[Tuple[int, int]] = ()):
        merged: List[List[int]] = []
        for start, end in sorted((int(a), int(b)) for a, b in intervals):
            if merged and start <= merged[-1][1] + 1:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        self._starts = [a for a, _ in merged]
        self._ends = [b for _, b in merged]
        self._count = sum(b - a + 1 for a, b in merged)

    @classmethod
    def parse(cls, key: str, value) -> "IndexRanges":
        """Validate a config value ([0, "2-4", 7], or an IndexRanges) into IndexRanges."""
        if isinstance(value, IndexRanges):
            return value
        if not isinstance(value, (list, tuple)):
            _fail(key, value)
        intervals = []
        for item in value:
            if isinstance(item, int) and not isinstance(item, bool) and 0 <= item <= MAX_INDEX:
                intervals.append((item, item))
                continue
            match = _RANGE.fullmatch(item) if isinstance(item, str) else None
            if match and int(match[1]) <= int(match[2]) <= MAX_INDEX:
                intervals.append((int(match[1]), int(match[2])))
                continue
            shown = item if not isinstance(item, str) or len(item) < 60 else item[:57] + "..."
            _fail(key, shown, _ALLOWED + f", at most {MAX_INDEX}")
        return cls(intervals)

    # -- set-like queries, all without expanding ---------------------------------------------
    def __contains__(self, value) -> bool:
        if isinstance(value, bool) or not isinstance(value, int):
            return False
        position = bisect.bisect_right(self._starts, value) - 1
        return position >= 0 and value <= self._ends[position]

    def __bool__(self) -> bool:
        return self._count > 0

    def __len__(self) -> int:
        return self._count

    def max(self) -> int:
        if not self._count:
            raise ValueError("max() of an empty selection")
        return self._ends[-1]

    def min(self) -> int:
        if not self._count:
            raise ValueError("min() of an empty selection")
        return self._starts[0]

    @property
    def intervals(self) -> Tuple[Tuple[int, int], ...]:
        """((start, end), ...) inclusive, sorted and merged: [0, "4-6"] -> ((0, 0), (4, 6))."""
        return tuple(zip(self._starts, self._ends))

    # -- list-like access, only for small selections ----------------------------------------
    def _check_small(self, what):
        if self._count > ITER_LIMIT:
            raise ConfigError(f"config: the selection {self} holds {self._count} values, too many to {what} "
                              f"(at most {ITER_LIMIT}); ask for membership, min() or max() instead.")

    def __iter__(self) -> Iterator[int]:
        self._check_small("list")
        for start, end in zip(self._starts, self._ends):
            yield from range(start, end + 1)

    def __getitem__(self, index):
        self._check_small("index")
        return list(self)[index]

    def __eq__(self, other) -> bool:
        if isinstance(other, IndexRanges):
            return self.intervals == other.intervals
        if isinstance(other, (list, tuple)):
            return len(other) == self._count and list(self) == sorted(other) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable-free but equal to lists: not hashable

    def to_config(self) -> list:
        """The config.json form: [0, "4-6"]."""
        return [a if a == b else f"{a}-{b}" for a, b in self.intervals]

    def __repr__(self) -> str:
        return repr(self.to_config())
