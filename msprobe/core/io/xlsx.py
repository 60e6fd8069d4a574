"""A small streaming xlsx writer: shared strings, numbers, whole-row red/yellow fills, several sheets,
optionally a frozen header row with an autofilter and columns sized to their content.

Going through openpyxl cell objects costs seconds per 100k rows; here the cells of each column are made
in bulk (text cells from a per-value cache, the numbers of adjacent number columns formatted in one call
by float_text, whole blocks of rows joined by a few str.replace), only cells not of their column's kind one by
one, and the rows joined a piece of rows at a time. The output opens in Excel/LibreOffice and reads back with
openpyxl (tests do exactly that).
"""
import os
import re
from itertools import chain, islice, repeat

import numpy as np

from msprobe.core.io.float_text import float_reprs, joined_ints, joined_reprs
from msprobe.core.io.zipwrite import ZipWriter
from msprobe.core.paths import FILE_MODE

# the exact types of a column's cells, a bit each (_kinds)
_STR, _NONE, _FLOAT, _INT, _BOOL, _OTHER = 1, 2, 4, 8, 16, 32
_KIND_BITS = {str: _STR, type(None): _NONE, float: _FLOAT, int: _INT, bool: _BOOL}


def _first_places(keys):
    """(place of the first occurrence of each distinct int64 key, in the order they occur; index of each key's among
    them): numpy.unique's, reordered (what follows is cheaper on places in order)."""
    _, firsts, inverse = np.unique(keys, return_index=True, return_inverse=True)
    order = np.argsort(firsts)
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return firsts[order], rank[inverse]


def _kinds(values):
    """The bits of the exact types of the cells `values`: _STR alone for texts only, 0 for none."""
    kinds = 0
    for kind in set(map(type, values)):
        kinds |= _KIND_BITS.get(kind, _OTHER)
    return kinds

__all__ = ["write_xlsx", "Sheet", "RED_RGB", "YELLOW_RGB"]

RED_RGB, YELLOW_RGB = "FFFF0000", "00FFFF00"
_INVALID_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f]")
_NEEDS_ESCAPE = re.compile("[&<>\x00-\x08\x0b\x0c\x0e-\x1f]")
_MAX_CELL_TEXT = 32767


class Sheet:
    """One worksheet: a name, column titles, columns (lists of equal length) and a style per row
    (0 plain, 1 yellow fill, 2 red fill; 3, 4, 5: the same in bold, to mark a row). `freeze_header`
    keeps the title row in view, adds an autofilter and sizes the columns."""

    def __init__(self, name, header, columns, row_styles=None, freeze_header=False):
        self.name = name[:31]
        self.header = list(header)
        # lists, or sequences that slice into lists (NumberColumn): read chunk by chunk when written
        self.columns = [c if hasattr(c, "__getitem__") and hasattr(c, "__len__") else list(c) for c in columns]
        self.row_styles = row_styles
        self.freeze_header = freeze_header


def _escape(text):
    text = str(text)
    if len(text) <= _MAX_CELL_TEXT and not _NEEDS_ESCAPE.search(text):
        return text
    if len(text) > _MAX_CELL_TEXT:
        text = text[:_MAX_CELL_TEXT]
    if _INVALID_XML.search(text):
        text = _INVALID_XML.sub("", text)
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _mostly_floats(values):
    sample = values[:64]
    return list(map(type, sample)).count(float) * 2 > len(sample)


def _mostly_none(values):
    sample = values[:64]
    return list(map(type, sample)).count(type(None)) * 2 > len(sample)


def _render_numeric_column(values, style, cache):
    """Number columns: format every cell in C, then redo the few cells that are not finite floats."""
    out = list(map(f"<c{style}><v>{{!r}}</v></c>".format, values))
    odd = [i for i, v in enumerate(values) if type(v) is not float or v - v != 0.0]
    if odd:
        fixed = _render_column([values[i] for i in odd], style, cache, numeric=False)
        for i, cell in zip(odd, fixed):
            out[i] = cell
    return out


def _render_column(values, style="", cache=None, numeric=True):
    """XML of each cell of one column; strings are escaped once per distinct value (per cache)."""
    cache = {} if cache is None else cache
    if numeric and values and _mostly_floats(values):
        return _render_numeric_column(values, style, cache)
    out = []
    append = out.append
    empty = f"<c{style}/>"
    for value in values:
        kind = type(value)
        if kind is float:
            if value - value == 0.0:  # finite
                append(f"<c{style}><v>{value!r}</v></c>")
            else:
                append(f'<c{style} t="inlineStr"><is><t>{value}</t></is></c>')
        elif kind is str:
            cell = cache.get(value)
            if cell is None:
                cell = f'<c{style} t="inlineStr"><is><t xml:space="preserve">{_escape(value)}</t></is></c>'
                cache[value] = cell
            append(cell)
        elif value is None:
            append(empty)
        elif kind is int:
            append(f"<c{style}><v>{value}</v></c>")
        else:  # bool, numpy scalars, anything else: as text
            append(f'<c{style} t="inlineStr"><is><t xml:space="preserve">{_escape(value)}</t></is></c>')
    return out


_CHUNK_ROWS = 5000
_SHEET_HEAD = ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
               '<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>')




def _needs_no_escape(joined):
    """Whether `joined` holds none of what _NEEDS_ESCAPE finds: no &, <, > and, with tabs and line breaks
    taken out, printable (every control character is not): most texts are told without the regex."""
    if "&" in joined or "<" in joined or ">" in joined:
        return False
    if joined.replace("\n", "").replace("\t", "").replace("\r", "").isprintable():
        return True
    return not _NEEDS_ESCAPE.search(joined)


_ESCAPED: dict = {}  # text -> _escape(text), of the texts that need it: a job's reports repeat them (stacks)


def _escaped(text):
    made = _ESCAPED.get(text)
    if made is None:
        if len(_ESCAPED) > 20000:
            _ESCAPED.clear()
        made = _ESCAPED[text] = _escape(text)
    return made


def _escape_all(texts):
    """_escape of each text; a list that needs none (the usual case) is checked in one pass."""
    if max(map(len, texts)) <= _MAX_CELL_TEXT and _needs_no_escape("\n".join(texts)):
        return texts
    return list(map(_escaped, texts))


class _InlineStrings(dict):
    """Text cells as inline strings: value -> escaped text, made once per distinct value."""
    slot = '<c t="inlineStr"><is><t xml:space="preserve">{}</t></is></c>'
    shared = False

    def __init__(self):
        super().__init__()
        self.cells = {}  # value -> the XML of a text cell holding it

    def __missing__(self, value):
        text = self[value] = _escape(value)
        return text

    def column_cells(self, column, empty=None):
        """The cell of each string of `column` (and `empty` for each None, where given); the new distinct values
        are made in bulk."""
        cells = self.cells
        new = [value for value in dict.fromkeys(column) if value not in cells and value is not None]
        if new:
            cells.update(zip(new, map(self.slot.format, self.fields(new))))
        if empty is None:
            return list(map(cells.__getitem__, column))
        return list(map(cells.get, column, repeat(empty)))

    def fields(self, values):
        """The field of each of the distinct strings `values` in the cell slot (made in bulk)."""
        fresh = [value for value in values if value not in self]
        if fresh:
            self.update(zip(fresh, _escape_all(fresh)))
        return list(map(self.__getitem__, values))

    def cell(self, value):
        cell = self.cells.get(value)
        if cell is None:
            cell = self.cells[value] = self.slot.format(self[value])
        return cell

    def trim(self):
        if len(self) > 200000:
            self.clear()
            self.cells.clear()


class _SharedStrings(_InlineStrings):
    """Text cells as indexes into the workbook's shared-string table (xl/sharedStrings.xml): a name that
    appears in the NPU and the bench column, or an `N/A` in every row, is stored once, so the sheet XML is
    about half as long and so is the time spent compressing it."""
    slot = '<c t="s"><v>{}</v></c>'
    shared = True

    def __init__(self):
        super().__init__()
        self.texts = []

    def __missing__(self, value):
        index = self[value] = len(self.texts)
        self.texts.append(_escape(value))
        return index

    def fields(self, values):
        fresh = [value for value in values if value not in self]
        if fresh:
            self.update(zip(fresh, range(len(self.texts), len(self.texts) + len(fresh))))
            self.texts.extend(_escape_all(fresh))
        return list(map(self.__getitem__, values))

    def indexes(self, values):
        """The index of each of the texts `values`, new ones numbered in the order they first appear (as
        cell() on each in turn would number them), in bulk."""
        self.fields(list(dict.fromkeys(values)))
        return list(map(self.__getitem__, values))

    def trim(self):
        if len(self.cells) > 200000:
            self.cells.clear()  # the indexes must stay valid until the table is written: kept

    def snapshot(self):
        return dict(self), list(self.texts), dict(self.cells)

    def restore(self, snapshot):
        """The state of a snapshot, into a table that holds nothing yet."""
        self.update(snapshot[0])
        self.texts.extend(snapshot[1])
        self.cells.update(snapshot[2])

    def xml(self):
        slot = '</t></si><si><t xml:space="preserve">'
        items = f'<si><t xml:space="preserve">{slot.join(self.texts)}</t></si>' if self.texts else ""
        return ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
                '<sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" '
                f'uniqueCount="{len(self.texts)}">{items}</sst>')


def _cell(value, strings):
    kind = type(value)
    if kind is str:
        return strings.cell(value)
    if kind is int:
        return f"<c><v>{value}</v></c>"
    return _render_column([value], "", None, numeric=False)[0]


def _is_odd_number(value):
    return type(value) is not float or value - value != 0.0


def _column_cells(column, strings):
    """XML of each cell of one column (a list) of a chunk. Most cells are of one kind (finite floats,
    strings or empty), made in bulk; the odd ones (a text in a number column, a number in a text
    column) in bulk too, one cell per distinct value (_odd_cells)."""
    if _mostly_floats(column):
        odd = [i for i, v in enumerate(column) if _is_odd_number(v)]
        texts = float_reprs([v if type(v) is float else 0.0 for v in column] if odd else column)
        cells = ("<c><v>" + "</v></c>,<c><v>".join(texts) + "</v></c>").split(",")  # no repr holds a comma
    elif _mostly_none(column):
        if _kinds(column) == _NONE:  # a column of messages without one in these rows
            return ["<c/>"] * len(column)
        odd = [i for i, v in enumerate(column) if v is not None]
        cells = ["<c/>"] * len(column)
    else:  # texts, maybe with a few other cells (a column of messages with empty rows): the texts' cells in bulk
        return _odd_cells(column, strings)
    if odd:
        for i, cell in zip(odd, _odd_cells(list(map(column.__getitem__, odd)), strings)):
            cells[i] = cell
    return cells


_HEAD, _SEP, _TAIL = "<c><v>", "</v></c><c><v>", "</v></c>"  # the cells of a row of numbers
_NAN = np.full((1, 1), np.nan)


def _marker():
    """The cell joined_reprs makes of a NaN (orjson's null, repr's nan): where a number block's odd cells go."""
    return joined_reprs(_NAN, _SEP, _HEAD, _TAIL)[0]


_SIMPLE = _STR | _NONE | _INT | _BOOL  # kinds whose equal values (of one type) make equal cells


def _odd_cells(values, strings):
    """_cell of each value; the texts' shared strings made in bulk (in order: the same numbering). Texts, None,
    ints and bools (a number block's usual odd cells): one cell made per distinct (type, value)."""
    kinds = _kinds(values)
    if kinds & ~_STR == 0:
        return strings.column_cells(values)
    if kinds & ~(_STR | _NONE) == 0:  # texts and empty cells (a column of messages): a cell a value, no tuple
        return strings.column_cells(values, "<c/>")
    if kinds & ~_SIMPLE == 0:
        keys = list(zip(map(type, values), values))
        distinct = dict.fromkeys(keys)
        texts = [value for kind, value in distinct if kind is str]  # in the order they first appear
        made = dict(zip(texts, strings.column_cells(texts)))
        for kind, value in distinct:
            distinct[kind, value] = made[value] if kind is str else _cell(value, strings)
        return list(map(distinct.__getitem__, keys))
    texts = [value for value in values if type(value) is str]
    made = iter(strings.column_cells(texts))
    return [next(made) if type(value) is str else _cell(value, strings) for value in values]


def _block_odd_cells(blocks, strings):
    """(the places row * width + column of the odd cells of a number block, ascending; their cells in that order),
    the cells' shared strings numbered in that order (row by row, then column by column)."""
    width = len(blocks)
    if not any(len(odd) for _, odd, _ in blocks):
        return np.zeros(0, dtype=np.int64), []
    places = np.concatenate([odd * width + k for k, (_, odd, _) in enumerate(blocks)])
    order = np.argsort(places, kind="stable")
    values = list(chain.from_iterable(cells for _, _, cells in blocks))
    return places[order], _odd_cells(list(map(values.__getitem__, order.tolist())), strings)


def _bracketed(rows, head, tail):
    """The lists of a part whose row texts are head + rows[i] + tail (joined with the row, not made a row at a time):
    [heads, rows, tails]; _set_row gives a row another whole text."""
    return [[head] * len(rows), rows, [tail] * len(rows)]


def _set_row(lists, row, text):
    """Row `row` of a part (its lists) made `text`."""
    lists[0][row] = text
    for other in lists[1:]:
        other[row] = ""


def _number_block(columns, start, stop, strings):
    """The lists (_bracketed) of the cells of adjacent number columns (NumberColumn) for each row of a chunk: the
    numbers of all rows formatted in one call, a NaN in each cell that is not a finite float, then those cells (a
    text, the text of a NaN) put in its place, their shared strings numbered in row order: one text a row
    (float_text.joined_reprs), the odd cells put in row by row."""
    blocks = [column.odd_block(start, stop) for column in columns]
    array = np.stack([values for values, _, _ in blocks], axis=1)
    places, cells = _block_odd_cells(blocks, strings)
    lists = _bracketed(joined_reprs(array, _SEP), _HEAD, _TAIL)
    if not cells:
        return lists
    rows = lists[1]
    width = len(blocks)
    odd_rows = places // width
    firsts = np.flatnonzero(np.diff(odd_rows, prepend=-1))  # where each row's odd cells start
    bounds = firsts.tolist() + [len(cells)]
    marker = _marker()
    for row, first, end in zip(odd_rows[firsts].tolist(), bounds, bounds[1:]):
        if end - first == width:  # no number in the row (a row of texts, as a non-tensor row's)
            _set_row(lists, row, "".join(cells[first:end]))
        else:  # the NaN cells replaced in column order (numbers hold no brace)
            _set_row(lists, row, (_HEAD + rows[row] + _TAIL).replace(marker, "{}").format(*cells[first:end]))
    return lists


def _is_number_column(column):
    return getattr(column, "formatter", True) is None and hasattr(column, "odd_block")


def _is_formatted_column(column):
    return getattr(column, "formatter", None) is not None and hasattr(column, "odd_block")


def _formatted_block(columns, start, stop, strings):
    """The lists (as _chunk_parts) of a chunk of adjacent NumberColumns with one formatter (the relative errors as percent
    texts; the formatter makes the text of each value alone). Into a shared-string table, as usual: the
    formatter called once per distinct text (_shared_text_block), the texts numbered in the order
    _column_cells would number them (column by column, row by row) and each row's indexes written in one
    go. Else, or where a cell would not be a text, each column as _column_cells makes it."""
    n, width = stop - start, len(columns)
    values = np.concatenate([column.values[start:stop] for column in columns])
    found = [column.overrides_between(start, stop) for column in columns]
    places = np.concatenate([offsets + k * n for k, (offsets, _) in enumerate(found)])
    overrides = list(chain.from_iterable(cells for _, cells in found))
    if type(strings) is _SharedStrings:
        made = _shared_text_block(columns[0].formatter, values, places, overrides, strings)
        if made is not None:
            head, tail = strings.slot.split("{}")
            indexes = np.ascontiguousarray(made.reshape(width, n).T)
            return _bracketed(joined_ints(indexes, tail + head), head, tail)
    cells = columns[0].formatter(values)
    for place, cell in zip(places.tolist(), overrides):
        cells[place] = cell
    made = [_column_cells(cells[k * n:(k + 1) * n], strings) for k in range(width)]
    return made


def _distinct_values(formatter, values, places):
    """(the rows not at `places`, the first of them of each distinct text, the index of each such row's among
    those firsts): values are the same text when their formatter `key`s (else their bits) are equal."""
    keys = formatter.key(values) if hasattr(formatter, "key") else values.copy()
    keys[np.isnan(keys)] = np.nan  # one NaN
    plain = np.ones(len(values), dtype=bool)
    plain[places] = False
    plain_places = np.flatnonzero(plain)
    firsts, inverse = _first_places(keys.view(np.int64)[plain_places])
    return plain_places, plain_places[firsts], inverse


def _shared_text_block(formatter, values, places, overrides, strings):
    """The shared-string index of each cell (the formatter's text of each value, the override at `places`),
    or None when a cell would not be a text. Values whose text is the same by the formatter's `key` (the
    rounded percentage: a job's relative errors are mostly 0.0%), else by their bits, are formatted once;
    the texts go to the table in the order of their first cell."""
    plain_places, firsts, inverse = _distinct_values(formatter, values, places)
    texts = list(formatter(values[firsts])) + overrides
    if set(map(type, texts)) != {str}:
        return None
    order = np.argsort(np.concatenate([firsts, places]), kind="stable").tolist()
    numbers = np.empty(len(texts), dtype=np.int64)
    numbers[order] = strings.indexes([texts[i] for i in order])
    made = np.empty(len(values), dtype=np.int64)
    made[plain_places] = numbers[:len(firsts)][inverse]
    made[places] = numbers[len(firsts):]
    return made


_LEAD: list = []  # [(the leading text columns, their rows' cells, the shared strings after them)] of the last sheet


def _leading_text_columns(sheet, start, stop, strings):
    """How many leading columns are lists of cells, when this chunk is a whole sheet written first into a
    workbook's shared-string table (else 0)."""
    columns = sheet.columns
    if start or stop != len(columns[0]) or type(strings) is not _SharedStrings or strings.texts:
        return 0
    lead = 0  # lists of text only: equal lists of texts make equal cells (1 == 1.0 == True would not)
    while lead < len(columns) and type(columns[lead]) is list and _kinds(columns[lead]) == _STR:
        lead += 1
    return lead


def _lead_parts(columns, strings):
    """The parts of the leading text columns: a job's reports start with the same row names, dtypes and
    shapes in every rank, so the cells and the shared strings they make are kept from the last sheet
    whose leading columns were equal."""
    seen = _LEAD[0] if _LEAD else None
    if seen is not None and len(seen[0]) == len(columns) and all(a == b for a, b in zip(seen[0], columns)):
        strings.restore(seen[2])
        rows = seen[1]
    else:  # each row's cells of these columns joined: one part
        rows = list(map("".join, zip(*[_column_cells(column, strings) for column in columns])))
        _LEAD[:] = [([list(column) for column in columns], rows, strings.snapshot())]
    return [(0, len(columns), [list(rows)])]  # a copy: rows get styled


def _chunk_parts(sheet, start, stop, strings):
    """[(first column, last column + 1, lists whose texts of a row, joined, are the XML of the row's cells in those
    columns)] covering every column:
    runs of adjacent number columns as one part (_number_block), likewise runs of number columns with one
    formatter (_formatted_block), every other column alone."""
    parts, columns, k = [], sheet.columns, 0
    lead = _leading_text_columns(sheet, start, stop, strings)
    if lead:
        parts, k = _lead_parts(columns[:lead], strings), lead
    while k < len(columns):
        end = k + 1
        if _is_number_column(columns[k]):
            while end < len(columns) and _is_number_column(columns[end]):
                end += 1
            parts.append((k, end, _number_block(columns[k:end], start, stop, strings)))
        elif _is_formatted_column(columns[k]):
            formatter = columns[k].formatter
            while end < len(columns) and _is_formatted_column(columns[end]) and columns[end].formatter is formatter:
                end += 1
            parts.append((k, end, _formatted_block(columns[k:end], start, stop, strings)))
        else:
            parts.append((k, end, [_column_cells(columns[k][start:stop], strings)]))
        k = end
    return parts


_PIECE_ROWS = 128  # rows joined and encoded at a time: ~100 kB texts, made in memory the allocator reuses


def _chunk_xml(sheet, start, strings):
    """XML bytes of the rows of a chunk, in pieces of _PIECE_ROWS rows: one text of a whole chunk (MBs) is
    memory fresh from the system for every chunk (its pages faulted in: ~0.6 ms a MB here, as much as the
    joining), the pieces are made in the same few blocks again and again and are deflated while in cache.
    Styled rows replace their row's text in each part."""
    stop = min(len(sheet.columns[0]), start + _CHUNK_ROWS)
    parts = _chunk_parts(sheet, start, stop, strings)
    styles, styled = sheet.row_styles, []
    if styles is not None:
        for row in np.flatnonzero(np.asarray(styles[start:stop])).tolist():
            attr = f' s="{int(styles[start + row])}"'
            styled.append((row, _render_column([column[start + row] for column in sheet.columns], attr, None,
                                               numeric=False)))
    strings.trim()
    for row, cells in styled:
        for first, end, lists in parts:
            _set_row(lists, row, "".join(cells[first:end]))
    rows = zip(repeat("<row>"), *chain.from_iterable(lists for _, _, lists in parts), repeat("</row>"))
    return ["".join(chain.from_iterable(islice(rows, _PIECE_ROWS))).encode("utf-8")
            for _ in range(0, stop - start, _PIECE_ROWS)]


_FORKED_SHEET: list = []  # the sheet being written, visible to forked render workers without pickling


def _render_chunk_in_worker(start):
    return _chunk_xml(_FORKED_SHEET[0], start, _InlineStrings())


def _chunks(sheet, strings):
    """XML of each chunk of rows (a list of bytes), in order; big sheets are rendered by two forked workers (with
    inline strings: a worker cannot add to the parent's shared-string table)."""
    rows = len(sheet.columns[0]) if sheet.columns else 0
    starts = range(0, rows, _CHUNK_ROWS)
    import multiprocessing

    if rows < 4 * _CHUNK_ROWS or (os.cpu_count() or 1) < 2 or multiprocessing.current_process().daemon:
        yield from (_chunk_xml(sheet, start, strings) for start in starts)
        return
    _FORKED_SHEET[:] = [sheet]
    try:
        with multiprocessing.get_context("fork").Pool(2) as pool:
            yield from pool.imap(_render_chunk_in_worker, starts)
    finally:
        _FORKED_SHEET.clear()


def _column_letters(index):
    letters = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        letters = chr(65 + rest) + letters
    return letters


_SAMPLE_ROWS = 200
_MAX_WIDTH = 60


_FIRST_REPRS = 8


def _float_width(floats):
    """The longest repr of finite floats (a list or a float64 array), counted at most 12: most columns meet
    12 at their first numbers, repr'd one by one; the rest in one call."""
    number, head = 0, floats[:_FIRST_REPRS]
    for text in map(repr, head.tolist() if isinstance(head, np.ndarray) else head):
        number = max(number, min(len(text), 12))
        if number == 12:
            return number
    if len(floats) > _FIRST_REPRS:
        number = min(12, max(number, max(map(len, float_reprs(floats[_FIRST_REPRS:])))))
    return number


def _lines_width(texts):
    """The length of the longest first line of `texts`."""
    if "\n" in "".join(texts):
        texts = [t.split("\n", 1)[0] for t in texts]
    return max(map(len, texts), default=0)


def _text_width(sample):
    """Width of the longest first line of a sample of cells (floats count their repr, at most 12)."""
    if _kinds(sample) & ~_STR == 0:
        return _lines_width(sample)
    floats = [v for v in sample if type(v) is float and v - v == 0.0]
    texts = [str(v) for v in sample if v is not None and _is_odd_number(v)]  # the str of nan is its repr
    return max(_float_width(floats), _lines_width(texts))


_TEXT_WIDTHS: dict = {}  # (title, sample of texts) -> width: a job's reports repeat their text columns


def _width(title, sample):
    return min(_MAX_WIDTH, max(len(str(title)) + 3, _text_width(sample) + 2, 8))


def _number_text_width(column):
    """_text_width of the first rows of a NumberColumn without a formatter: its finite numbers and its few
    other cells."""
    values, _, cells = column.odd_block(0, min(len(column), _SAMPLE_ROWS))  # the odd cells hold NaN in values
    # what _text_width makes of the finite values and the odd cells (none of them a finite float), without
    # looking at each value's type
    return max(_float_width(values[np.isfinite(values)]), _lines_width([str(cell) for cell in cells if cell is not None]))


def _formatted_text_width(column):
    """_text_width of the first rows of a NumberColumn with a formatter: the formatter's text of each distinct
    value (by its `key` where it has one, else by its bits: the texts depend on it alone, as _shared_text_block
    relies on) made once, and the overrides."""
    n = min(len(column), _SAMPLE_ROWS)
    values, formatter = column.values[:n], column.formatter
    rows, overrides = column.overrides_between(0, n)
    _, firsts, _ = _distinct_values(formatter, values, rows)
    texts = list(formatter(values[firsts])) if len(firsts) else []
    return _text_width(texts + list(overrides))


def _column_widths(sheet):
    """Width per column from the title and the first rows' text (a sample: sizing must stay cheap)."""
    widths = []
    for title, column in zip(sheet.header, sheet.columns):
        if _is_number_column(column) or _is_formatted_column(column):
            width = (_number_text_width if _is_number_column(column) else _formatted_text_width)(column)
            widths.append(min(_MAX_WIDTH, max(len(str(title)) + 3, width + 2, 8)))
            continue
        sample = column[:_SAMPLE_ROWS]
        if type(sample) is list and _kinds(sample) & ~_NONE == 0:  # empty (a column of messages)
            widths.append(_width(title, []))
        elif type(sample) is list and _kinds(sample) == _STR and type(title) is str:
            key = (title, tuple(sample))
            width = _TEXT_WIDTHS.get(key)
            if width is None:
                if len(_TEXT_WIDTHS) > 512:
                    _TEXT_WIDTHS.clear()
                width = _TEXT_WIDTHS[key] = _width(title, sample)
            widths.append(width)
        else:
            widths.append(_width(title, sample))
    return widths


def _sheet_head(sheet):
    """Worksheet XML up to <sheetData>: frozen title row and column widths when asked for."""
    if not sheet.freeze_header:
        return _SHEET_HEAD
    view = ('<sheetViews><sheetView workbookViewId="0"><pane ySplit="1" topLeftCell="A2" activePane="bottomLeft" '
            'state="frozen"/><selection pane="bottomLeft" activeCell="A2" sqref="A2"/></sheetView></sheetViews>')
    cols = "".join(f'<col min="{n}" max="{n}" width="{w}" customWidth="1"/>'
                   for n, w in enumerate(_column_widths(sheet), 1))
    head = _SHEET_HEAD[:-len("<sheetData>")]
    return f"{head}{view}<cols>{cols}</cols><sheetData>"


def _sheet_tail(sheet):
    rows = len(sheet.columns[0]) if sheet.columns else 0
    if not sheet.freeze_header or not sheet.header:
        return "</sheetData></worksheet>"
    last = _column_letters(len(sheet.header) - 1)
    return f'</sheetData><autoFilter ref="A1:{last}{rows + 1}"/></worksheet>'


def _write_sheet(stream, sheet, strings):
    """Stream the worksheet XML in chunks of rows, so memory stays flat on 100k-row reports."""
    stream.write((_sheet_head(sheet) + f"<row>{''.join(_render_column(sheet.header))}</row>").encode("utf-8"))
    from tqdm import tqdm

    rows = len(sheet.columns[0]) if sheet.columns else 0
    with tqdm(total=rows, desc="write xlsx", unit="row", disable=rows < 50000) as progress:
        for pieces in _chunks(sheet, strings):
            for data in pieces:
                stream.write(data)
            progress.update(min(_CHUNK_ROWS, rows - progress.n))
    stream.write(_sheet_tail(sheet).encode("utf-8"))


_CONTENT_TYPES = ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
                  '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
                  '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
                  '<Default Extension="xml" ContentType="application/xml"/>'
                  '<Override PartName="/xl/workbook.xml" '
                  'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/>'
                  '<Override PartName="/xl/styles.xml" '
                  'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.styles+xml"/>'
                  '<Override PartName="/xl/sharedStrings.xml" '
                  'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sharedStrings+xml"/>'
                  '{sheets}</Types>')
_SHEET_TYPE = ('<Override PartName="/xl/worksheets/sheet{n}.xml" '
               'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/>')
_ROOT_RELS = ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
              '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
              '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
              'officeDocument" Target="xl/workbook.xml"/></Relationships>')
_STYLES = ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
           '<styleSheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">'
           '<fonts count="2"><font><sz val="11"/><name val="Calibri"/><family val="2"/></font>'
           '<font><b/><sz val="11"/><name val="Calibri"/><family val="2"/></font></fonts>'
           '<fills count="4"><fill><patternFill patternType="none"/></fill>'
           '<fill><patternFill patternType="gray125"/></fill>'
           f'<fill><patternFill patternType="solid"><fgColor rgb="{YELLOW_RGB}"/><bgColor rgb="{YELLOW_RGB}"/>'
           '</patternFill></fill>'
           f'<fill><patternFill patternType="solid"><fgColor rgb="{RED_RGB}"/><bgColor rgb="{RED_RGB}"/>'
           '</patternFill></fill></fills>'
           '<borders count="1"><border><left/><right/><top/><bottom/><diagonal/></border></borders>'
           '<cellStyleXfs count="1"><xf numFmtId="0" fontId="0" fillId="0" borderId="0"/></cellStyleXfs>'
           '<cellXfs count="6"><xf numFmtId="0" fontId="0" fillId="0" borderId="0" xfId="0"/>'
           '<xf numFmtId="0" fontId="0" fillId="2" borderId="0" xfId="0" applyFill="1"/>'
           '<xf numFmtId="0" fontId="0" fillId="3" borderId="0" xfId="0" applyFill="1"/>'
           '<xf numFmtId="0" fontId="1" fillId="0" borderId="0" xfId="0" applyFont="1"/>'
           '<xf numFmtId="0" fontId="1" fillId="2" borderId="0" xfId="0" applyFont="1" applyFill="1"/>'
           '<xf numFmtId="0" fontId="1" fillId="3" borderId="0" xfId="0" applyFont="1" applyFill="1"/></cellXfs>'
           '<cellStyles count="1"><cellStyle name="Normal" xfId="0" builtinId="0"/></cellStyles></styleSheet>')


def _workbook(sheets):
    entries = "".join(f'<sheet name="{_escape(s.name)}" sheetId="{n}" r:id="rId{n}"/>'
                      for n, s in enumerate(sheets, 1))
    workbook = ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
                '<workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" '
                'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships">'
                f'<sheets>{entries}</sheets></workbook>')
    rels = "".join(f'<Relationship Id="rId{n}" Type="http://schemas.openxmlformats.org/officeDocument/2006/'
                   f'relationships/worksheet" Target="worksheets/sheet{n}.xml"/>' for n in range(1, len(sheets) + 1))
    rels += (f'<Relationship Id="rId{len(sheets) + 1}" Type="http://schemas.openxmlformats.org/officeDocument/2006/'
             'relationships/styles" Target="styles.xml"/>')
    rels += (f'<Relationship Id="rId{len(sheets) + 2}" Type="http://schemas.openxmlformats.org/officeDocument/2006/'
             'relationships/sharedStrings" Target="sharedStrings.xml"/>')
    rels = ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
            f'<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">{rels}'
            '</Relationships>')
    return workbook, rels


def write_xlsx(path, sheets):
    """Write `sheets` (list of Sheet) to `path` atomically with mode 0640."""
    tmp = f"{path}.tmp{os.getpid()}"
    workbook, rels = _workbook(sheets)
    try:
        with ZipWriter(tmp) as archive:  # deflate level 1, by ISA-L where installed (zipwrite.py)
            types = "".join(_SHEET_TYPE.format(n=n) for n in range(1, len(sheets) + 1))
            archive.writestr("[Content_Types].xml", _CONTENT_TYPES.format(sheets=types))
            archive.writestr("_rels/.rels", _ROOT_RELS)
            archive.writestr("xl/workbook.xml", workbook)
            archive.writestr("xl/_rels/workbook.xml.rels", rels)
            archive.writestr("xl/styles.xml", _STYLES)
            strings = _SharedStrings()  # one table for the workbook, written after the sheets that fill it
            for n, sheet in enumerate(sheets, 1):
                with archive.open(f"xl/worksheets/sheet{n}.xml") as stream:
                    _write_sheet(stream, sheet, strings)
            archive.writestr("xl/sharedStrings.xml", strings.xml())
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
