"""A small streaming xlsx writer: shared strings, numbers, whole-row red/yellow fills, several sheets,
optionally a frozen header row with an autofilter and columns sized to their content.

Going through openpyxl cell objects costs seconds per 100k rows; here every column is rendered to
XML text in one list comprehension and rows are joined, so a 115k x 25 sheet takes about a second.
The output opens in Excel/LibreOffice and reads back with openpyxl (tests do exactly that).
"""
import os
import re
import zipfile

from msprobe.core.paths import FILE_MODE

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
    return sum(type(v) is float for v in sample) * 2 > len(sample)


def _mostly_none(values):
    sample = values[:64]
    return sum(v is None for v in sample) * 2 > len(sample)


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


_NUMBER_SLOT = "<c><v>{}</v></c>"  # its field is repr(value), made by map(repr, column): twice as fast as {!r}


class _InlineStrings(dict):
    """Text cells as inline strings: value -> escaped text, made once per distinct value."""
    slot = '<c t="inlineStr"><is><t xml:space="preserve">{}</t></is></c>'
    shared = False

    def __missing__(self, value):
        text = self[value] = _escape(value)
        return text

    def cell(self, value):
        return self.slot.format(self[value])

    def trim(self):
        if len(self) > 200000:
            self.clear()


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

    def trim(self):
        pass  # indexes must stay valid until the table is written

    def xml(self):
        items = "".join(f'<si><t xml:space="preserve">{text}</t></si>' for text in self.texts)
        return ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
                '<sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" '
                f'uniqueCount="{len(self.texts)}">{items}</sst>')


def _cell(value, strings):
    return strings.cell(value) if type(value) is str else _render_column([value], "", None, numeric=False)[0]


def _render_rows(columns, strings, odd_cells=None):
    """Rows of one chunk: one str.format call per row for the common case (finite floats in number
    columns, strings in text columns); rows holding anything else are rendered cell by cell.
    odd_cells: per column, the offsets of cells that are not finite floats when the column knows them
    (NumberColumn.cells_and_odd), else None."""
    slots, fields, odd = [], [], set()
    for column, known_odd in zip(columns, odd_cells or [None] * len(columns)):
        if known_odd is not None:
            slots.append(_NUMBER_SLOT)
            fields.append(list(map(repr, column)))
            odd.update(known_odd)
        elif column and _mostly_none(column):
            slots.append("<c/>{}")
            fields.append([""] * len(column))
            odd.update(i for i, v in enumerate(column) if v is not None)
        elif column and _mostly_floats(column):
            slots.append(_NUMBER_SLOT)
            fields.append(list(map(repr, column)))
            odd.update(i for i, v in enumerate(column) if type(v) is not float or v - v != 0.0)
        else:
            slots.append(strings.slot)
            if set(map(type, column)) <= {str}:
                fields.append(list(map(strings.__getitem__, column)))
                continue
            texts = []
            for i, value in enumerate(column):
                if type(value) is str:
                    texts.append(strings[value])
                else:
                    texts.append("")
                    odd.add(i)
            fields.append(texts)
    lines = list(map(("<row>" + "".join(slots) + "</row>").format, *fields))
    for i in odd:
        lines[i] = f"<row>{''.join(_cell(c[i], strings) for c in columns)}</row>"
    return lines


def _chunk_xml(sheet, start, strings):
    stop = min(len(sheet.columns[0]), start + _CHUNK_ROWS)
    chunk, odd_cells = [], []
    for col in sheet.columns:
        cells, odd = col.cells_and_odd(start, stop) if hasattr(col, "cells_and_odd") else (col[start:stop], None)
        chunk.append(cells)
        odd_cells.append(odd)
    lines = _render_rows(chunk, strings, odd_cells)
    styles = sheet.row_styles
    if styles is not None:
        for offset in (i - start for i in range(start, stop) if styles[i]):
            attr = f' s="{int(styles[start + offset])}"'
            lines[offset] = f"<row>{''.join(_render_column([col[offset] for col in chunk], attr, None, numeric=False))}</row>"
    strings.trim()
    return "".join(lines).encode("utf-8")


_FORKED_SHEET: list = []  # the sheet being written, visible to forked render workers without pickling


def _render_chunk_in_worker(start):
    return _chunk_xml(_FORKED_SHEET[0], start, _InlineStrings())


def _chunks(sheet, strings):
    """XML bytes of each chunk of rows, in order; big sheets are rendered by two forked workers (with
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


def _column_widths(sheet):
    """Width per column from the title and the first rows' text (a sample: sizing must stay cheap)."""
    widths = []
    for title, column in zip(sheet.header, sheet.columns):
        sample = column[:_SAMPLE_ROWS]
        longest = max((len(str(v).split("\n", 1)[0]) if type(v) is not float else min(len(repr(v)), 12)
                       for v in sample if v is not None), default=0)
        widths.append(min(_MAX_WIDTH, max(len(str(title)) + 3, longest + 2, 8)))
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
        for data in _chunks(sheet, strings):
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
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
            types = "".join(_SHEET_TYPE.format(n=n) for n in range(1, len(sheets) + 1))
            archive.writestr("[Content_Types].xml", _CONTENT_TYPES.format(sheets=types))
            archive.writestr("_rels/.rels", _ROOT_RELS)
            archive.writestr("xl/workbook.xml", workbook)
            archive.writestr("xl/_rels/workbook.xml.rels", rels)
            archive.writestr("xl/styles.xml", _STYLES)
            strings = _SharedStrings()  # one table for the workbook, written after the sheets that fill it
            for n, sheet in enumerate(sheets, 1):
                with archive.open(f"xl/worksheets/sheet{n}.xml", "w", force_zip64=True) as stream:
                    _write_sheet(stream, sheet, strings)
            archive.writestr("xl/sharedStrings.xml", strings.xml())
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
