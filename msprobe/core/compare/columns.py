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
    default rendering of a slice (e.g. percentages)."""

    def __init__(self, values, overrides=None, formatter=None):
        self.values = np.asarray(values, dtype=np.float64)
        self.overrides = overrides or {}
        self._override_rows = np.array(sorted(self.overrides), dtype=np.int64)
        cells = list(map(self.overrides.__getitem__, self._override_rows.tolist()))
        # overrides that are finite floats: the xlsx writer formats them with the other numbers
        self._float_overrides = np.array([type(c) is float and c - c == 0.0 for c in cells], dtype=bool)
        self._override_floats = np.array([c if f else 0.0 for c, f in zip(cells, self._float_overrides)], np.float64)
        # the other overrides (texts, None, non-finite floats ...): the odd cells a job's ranks share
        self._other_rows = self._override_rows[~self._float_overrides]
        self._other_cells = [c for c, f in zip(cells, self._float_overrides.tolist()) if not f]
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

    def __getitem__(self, index):
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self.values))
            if step != 1:
                return [self[i] for i in range(start, stop, step)]
            cells = self._cells(self.values[start:stop])
            rows = self._override_rows
            for row in rows[np.searchsorted(rows, start):np.searchsorted(rows, stop)].tolist():
                cells[row - start] = self.overrides[row]
            return cells
        if index < 0:
            index += len(self.values)
        if index in self.overrides:
            return self.overrides[index]
        return self._cells(self.values[index:index + 1])[0]

    def block(self, start, stop):
        """(values, odd) of rows start..stop for the xlsx writer: the float64 values with the overrides that
        are finite floats put in, and {offset: cell} of the cells that are not a finite float (the text of
        a NaN or an infinity, every other override), found with numpy so the writer need not look at every
        cell. None with a formatter (any cell may be text)."""
        if self.formatter is not None:
            return None
        values = self.values[start:stop].copy()
        lo, hi = np.searchsorted(self._override_rows, [start, stop])
        rows, floats = self._override_rows[lo:hi] - start, self._float_overrides[lo:hi]
        values[rows[floats]] = self._override_floats[lo:hi][floats]
        nonfinite = ~np.isfinite(values)
        nonfinite[rows] = False
        odd = {i: str(v) for i, v in zip(np.flatnonzero(nonfinite).tolist(), values[nonfinite].tolist())}
        others = rows[~floats]
        odd.update(zip(others.tolist(), map(self.overrides.__getitem__, (others + start).tolist())))
        return values, odd

    def odd_block(self, start, stop):
        """(values, rows, cells) of rows start..stop for the xlsx writer: the float64 values with the overrides
        that are finite floats put in and NaN in every row whose cell is not a finite float, those rows (offsets
        from start, ascending) and their cells (the text of a NaN or an infinity, any other override as it is).
        Only the few rows holding a non-finite value are looked at one by one."""
        values = self.values[start:stop].copy()
        rows = self._override_rows
        lo, hi = np.searchsorted(rows, [start, stop])
        if hi > lo:
            floats = self._float_overrides[lo:hi]
            values[rows[lo:hi][floats] - start] = self._override_floats[lo:hi][floats]
        others = self._other_rows
        first, last = np.searchsorted(others, [start, stop])
        odd, cells = others[first:last] - start, self._other_cells[first:last]
        nonfinite = ~np.isfinite(values)
        if hi > lo:
            nonfinite[rows[lo:hi] - start] = False
        if nonfinite.any():  # a NaN or an infinity that is no override: its text, in row order with the others
            bad = np.flatnonzero(nonfinite)
            merged = list(zip(odd.tolist(), cells)) + list(zip(bad.tolist(), map(str, values[bad].tolist())))
            merged.sort(key=lambda item: item[0])
            odd, cells = np.array([row for row, _ in merged], dtype=np.int64), [cell for _, cell in merged]
        values[odd] = np.nan
        return values, odd, cells

    def __iter__(self):
        for start in range(0, len(self.values), 4096):
            yield from self[start:start + 4096]
