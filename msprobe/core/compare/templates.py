"""Dump templates: the ranks of one job write dump.json files that differ only in their statistics.

A job compare reads hundreds of dump.json files of one structure: the same entries, arguments, dtypes and
shapes, with other Max/Min/Mean/Norm numbers. Parsing each file into dicts and flattening ~2,000 rows in
Python costs about 25 ms a file; a template does it once. A file's text is split at the numbers that
are the value of a key; those after a `"Max"`, `"Min"`, `"Mean"` or `"Norm"` key are the statistics, the
others must be the same text as in the template's file; when the rest of the text (the skeleton, keys
included) is byte for byte a template's, the file's table is the template's table with these numbers put
in, parsed by orjson in one call. Anything else (another entry, shape, dtype, scalar value, a null
statistic, a NaN literal, an escape in a string) changes the skeleton: the file is read in full.

A template is trusted only after a check: its file is parsed a second time with every statistic number
replaced by a distinct sentinel; the sentinels must land once each in the table's statistic cells and
every other cell of that table must equal the real table's. Without orjson no template is made.
"""
import itertools
import operator
import re

import numpy as np

try:
    import orjson
except ImportError:  # pragma: no cover - orjson is a base dependency
    orjson = None  # type: ignore[assignment]

__all__ = ["DumpTemplates", "STAT_COLUMNS"]

STAT_COLUMNS = ("max", "min", "mean", "norm")
# a number that is the value of a dict key, after `": ` (json.dump) or `":` (compact, msprobe's writer)
_VALUE_NUMBER = {b'": ': re.compile(rb'": (-?[0-9][0-9.eE+-]*)'), b'":': re.compile(rb'":(-?[0-9][0-9.eE+-]*)')}
_STAT_KEYS = (b'"Max', b'"Min', b'"Mean', b'"Norm')
_STRUCTURES = itertools.count(1)  # one number per template: DumpTable.structure
_SENTINEL_BASE, _SENTINEL_STEP = 7.0e300, 1.0e286  # distinct floats no dump holds


def split_numbers(data, separator):
    """[text, number, text, number, ..., text]: `data` split at the numbers that follow `separator`."""
    return _VALUE_NUMBER[separator].split(data)


def _is_stat_slot(piece):
    """Whether the number after skeleton piece `piece` (which ends with its key, the closing quote cut off) is a
    statistic."""
    return piece.endswith(_STAT_KEYS)


def _getter(indexes):
    """A function giving the tuple of a list's items at `indexes`, in one C call (itemgetter gives a bare item
    for one index)."""
    if len(indexes) > 1:
        return operator.itemgetter(*indexes)
    return lambda items: tuple(items[i] for i in indexes)


class _Template:
    """One structure: the skeleton pieces, which numbers are statistics and where they go, the table."""

    def __init__(self, separator, skeleton, numbers, stat_slots, cells, table, stats):
        self.separator = separator
        self.skeleton = skeleton  # the text between the numbers
        self.stat_slots = stat_slots  # indexes of the numbers that are statistics
        fixed = sorted(set(range(len(numbers))) - set(stat_slots))
        self.fixed_slots = fixed
        self.fixed_of, self.stats_of = _getter(fixed), _getter(stat_slots)
        self.fixed_numbers = self.fixed_of(numbers)  # must be the same text in every file
        self.cells = cells  # flat index into the (rows, 4) statistics of each statistic number
        self.table = table
        self.stats = stats  # (rows, 4) float64 of the table, the base the numbers are put into
        self.hits = 0


class DumpTemplates:
    """Templates of the dump.json structures seen in this process (a few: a job's NPU and bench sides)."""

    def __init__(self, capacity=4, builds=8):
        self.templates = []
        self.capacity = capacity
        self.builds_left = builds  # a job whose every rank differs stops paying for templates
        self._stack = (None, None)  # (bytes, parsed) of the last stack.json: a job's ranks run the same code

    def stacks(self, path, parse):
        """parse(path) of a stack.json, reused while the file's bytes are those of the last one read."""
        with open(path, "rb") as handle:
            data = handle.read()
        if data != self._stack[0]:
            self._stack = (data, parse(path))
        return self._stack[1]

    def load(self, path, data, parse_table, parse_strict):
        """The DumpTable of `path` whose bytes are `data`; parse_table(data) reads it in full (as
        load_dump does), parse_strict(text) reads a text with orjson alone (raising what it raises)."""
        if orjson is None or b"\\" in data:
            return parse_table(data)
        separator = parts = None
        for template in self.templates:
            separator = separator or _separator(data)
            parts = parts or split_numbers(data, separator)
            stat_text = _stat_text(template, separator, parts[0::2], parts[1::2])
            table = None if stat_text is None else self._fill(template, path, stat_text)
            if table is not None:
                return table
        separator = separator or _separator(data)
        parts = parts or split_numbers(data, separator)
        skeleton, numbers = parts[0::2], parts[1::2]
        table = parse_table(data)
        if self.builds_left > 0 and len(table):
            self.builds_left -= 1
            template = self._build(table, separator, skeleton, numbers, parse_strict)
            if template is not None:
                self.templates.insert(0, template)
                del self.templates[self.capacity:]
        return table

    def _fill(self, template, path, stat_text):
        """The table of a file of `template`'s structure whose statistics are the JSON array `stat_text`."""
        try:
            values = orjson.loads(stat_text)
            stats = template.stats.copy()
            # one float() a value (the list holds floats and ints only), not numpy's per-item type discovery
            stats.ravel()[template.cells] = np.fromiter(values, dtype=np.float64, count=len(values))
        except (orjson.JSONDecodeError, TypeError, ValueError, OverflowError):
            return None  # a number orjson or float64 cannot take: read in full, with its messages
        template.hits += 1
        return _table_like(template.table, path, stats)

    def _build(self, table, separator, skeleton, numbers, parse_strict):
        """A checked template of `table` (parsed from skeleton + numbers), or None."""
        stat_slots = [i for i, piece in enumerate(skeleton[:-1]) if _is_stat_slot(piece)]
        if not stat_slots:
            return None
        sentinels = [_SENTINEL_BASE + i * _SENTINEL_STEP for i in range(len(stat_slots))]
        texts = list(numbers)
        for slot, value in zip(stat_slots, sentinels):
            texts[slot] = repr(value).encode()
        marked_parts = [None] * (len(skeleton) + len(texts))
        marked_parts[0::2], marked_parts[1::2] = skeleton, texts
        try:
            marked = parse_strict(separator.join([marked_parts[0]] + [b"".join(pair) for pair in zip(
                marked_parts[1::2], marked_parts[2::2])]))
        except Exception:  # noqa: BLE001 - a file the check cannot read is simply not a template
            return None
        real = np.array([table.columns[key] for key in STAT_COLUMNS], dtype=np.float64).T
        probe = np.array([marked.columns[key] for key in STAT_COLUMNS], dtype=np.float64).T if len(marked) else None
        if probe is None or probe.shape != real.shape:
            return None
        if any(marked.columns[key] != table.columns[key] for key in table.columns if key not in STAT_COLUMNS):
            return None
        if marked.header != table.header or marked.entries != table.entries:
            return None
        flat = probe.ravel()
        where = {value: i for i, value in enumerate(sentinels)}
        cells = np.full(len(sentinels), -1, dtype=np.int64)
        others = np.ones(len(flat), dtype=bool)
        for index in np.flatnonzero(flat >= _SENTINEL_BASE).tolist():
            slot = where.get(float(flat[index]))
            if slot is None or cells[slot] >= 0:
                return None
            cells[slot] = index
            others[index] = False
        if (cells < 0).any():
            return None
        base = real.ravel()
        if not np.array_equal(base[others], flat[others], equal_nan=True):
            return None
        table.structure = next(_STRUCTURES)
        return _Template(separator, skeleton, numbers, stat_slots, cells, table, real.copy())


def _separator(data):
    """The writer's way of separating a key from its value, judged from the first keys."""
    head = data[:65536]
    return b'": ' if head.count(b'": ') * 2 > head.count(b'":') else b'":'


def _stat_text(template, separator, skeleton, numbers):
    """The JSON array of a split file's statistics when the rest of its text is `template`'s, else None."""
    if separator != template.separator or len(skeleton) != len(template.skeleton) or skeleton != template.skeleton:
        return None
    if template.fixed_of(numbers) != template.fixed_numbers:
        return None
    return b"[" + b",".join(template.stats_of(numbers)) + b"]"


def _table_like(table, path, stats):
    """A table with `table`'s structure (its lists shared) and these statistics."""
    made = table.__class__(path, dict(table.header))
    made.columns = dict(table.columns)
    for k, key in enumerate(STAT_COLUMNS):
        made.columns[key] = stats[:, k].tolist()
    made.entries = table.entries
    made.structure = table.structure
    made.stat_array = stats
    return made
