"""A report column of numbers kept as a numpy array, turned into cells only when read.

A 100k-row statistics report has 16 number columns; as Python float lists they cost ~40 MB, as
arrays 13 MB. The xlsx writer reads them in slices of a few thousand rows.
"""
from collections.abc import Sequence

import numpy as np

__all__ = ["NumberColumn"]


class NumberColumn(Sequence):
    """Cells of `values` (float64 array): a float per finite value, its text otherwise, `overrides`
    {row: cell} for rows that hold something else. `formatter(array) -> list of cells` replaces the
    default rendering of a slice (e.g. percentages); each cell must depend on its value alone (the xlsx
    writer formats adjacent columns with one formatter in one call, and may format each distinct value,
    or each distinct `formatter.key(values)` where the formatter has one, once)."""

    def __init__(self, values, overrides=None, formatter=None):
        self.values = np.asarray(values, dtype=np.float64)
        self.overrides = overrides or {}
        self._override_rows = np.array(sorted(self.overrides), dtype=np.int64)
        cells = self._override_cells = list(map(self.overrides.__getitem__, self._override_rows.tolist()))
        # overrides that are finite floats (the xlsx writer formats them with the other numbers), and the
        # others (texts, None, non-finite floats ...: the odd cells a job's ranks share)
        finite = [type(c) is float and c - c == 0.0 for c in cells]
        self._float_rows = self._override_rows[np.array(finite, dtype=bool)]
        self._float_cells = np.array([c for c, f in zip(cells, finite) if f], dtype=np.float64)
        self._other_rows = self._override_rows[~np.array(finite, dtype=bool)]
        self._other_cells = [c for c, f in zip(cells, finite) if not f]
        self.formatter = formatter

    def __len__(self):
        return len(self.values)

    def with_values(self, values):
        """A column of other values with the same overrides and formatter (made without redoing them)."""
        made = object.__new__(NumberColumn)
        made.__dict__.update(self.__dict__)
        made.values = np.asarray(values, dtype=np.float64)
        return made

    def _cells(self, values):
        if self.formatter is not None:
            return self.formatter(values)
        cells = values.tolist()
        for i in np.flatnonzero(~np.isfinite(values)):  # xlsx has no NaN/Inf numbers
            cells[i] = str(cells[i])
        return cells

    def overrides_between(self, start, stop):
        """(offsets from start, cells) of the overrides of rows start..stop, in row order."""
        rows = self._override_rows
        if not start and stop >= len(self.values):
            return rows, self._override_cells
        first, last = np.searchsorted(rows, (start, stop)).tolist()
        return rows[first:last] - start, self._override_cells[first:last]

    def __getitem__(self, index):
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self.values))
            if step != 1:
                return [self[i] for i in range(start, stop, step)]
            cells = self._cells(self.values[start:stop])
            offsets, overrides = self.overrides_between(start, stop)
            for offset, cell in zip(offsets.tolist(), overrides):
                cells[offset] = cell
            return cells
        if index < 0:
            index += len(self.values)
        if index in self.overrides:
            return self.overrides[index]
        return self._cells(self.values[index:index + 1])[0]

    def odd_block(self, start, stop):
        """(values, rows, cells) of rows start..stop for the xlsx writer: the float64 values with the overrides
        that are finite floats put in and NaN in every row whose cell is not a finite float, those rows (offsets
        from start, ascending) and their cells (the text of a NaN or an infinity, any other override as it is).
        Only the few rows holding a non-finite value are looked at one by one."""
        values = self.values[start:stop].copy()
        floats, odd, cells = self._float_rows, self._other_rows, self._other_cells
        if start or stop < len(self.values):
            first, last = np.searchsorted(floats, (start, stop)).tolist()
            values[floats[first:last] - start] = self._float_cells[first:last]
            first, last = np.searchsorted(odd, (start, stop)).tolist()
            odd, cells = odd[first:last] - start, cells[first:last]
        elif len(floats):
            values[floats] = self._float_cells
        values[odd] = np.nan
        nonfinite = ~np.isfinite(values)
        if np.count_nonzero(nonfinite) > len(odd):  # a NaN or an infinity that is no override: its text too
            nonfinite[odd] = False
            bad = np.flatnonzero(nonfinite)
            merged = list(zip(odd.tolist(), cells)) + list(zip(bad.tolist(), map(str, values[bad].tolist())))
            merged.sort(key=lambda item: item[0])
            odd, cells = np.array([row for row, _ in merged], dtype=np.int64), [cell for _, cell in merged]
            values[bad] = np.nan
        return values, odd, cells

    def __iter__(self):
        for start in range(0, len(self.values), 4096):
            yield from self[start:start + 4096]
