"""A report column of numbers kept as a numpy array, turned into cells only when read.

A 100k-row statistics report has 16 number columns; as Python float lists they cost ~40 MB, as
arrays 13 MB. The xlsx writer reads them in slices of a few thousand rows.
"""
from collections.abc import Sequence

import numpy as np

__all__ = ["NumberColumn"]


class NumberColumn(Sequence):
    """Cells of `values` (float64 array): a float per finite value, its text otherwise, `overrides`
    {row: cell} for rows that hold something else; `formatter(float) -> cell` changes how values show."""

    def __init__(self, values, overrides=None, formatter=None):
        self.values = np.asarray(values, dtype=np.float64)
        self.overrides = overrides or {}
        self.formatter = formatter

    def __len__(self):
        return len(self.values)

    def _cell(self, value):
        if self.formatter is not None:
            return self.formatter(value)
        return value if value - value == 0.0 else str(value)

    def __getitem__(self, index):
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self.values))
            cells = [self._cell(v) for v in self.values[index].tolist()] if self.formatter is not None or \
                not np.isfinite(self.values[index]).all() else self.values[index].tolist()
            if self.overrides:
                for position, row in enumerate(range(start, stop, step)):
                    if row in self.overrides:
                        cells[position] = self.overrides[row]
            return cells
        if index < 0:
            index += len(self.values)
        if index in self.overrides:
            return self.overrides[index]
        return self._cell(float(self.values[index]))

    def __iter__(self):
        for start in range(0, len(self.values), 4096):
            yield from self[start:start + 4096]
