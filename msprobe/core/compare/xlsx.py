"""A small streaming xlsx writer: inline strings, numbers, whole-row red/yellow fills, several sheets.

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
_MAX_CELL_TEXT = 32767


class Sheet:
    """One worksheet: a name, column titles, columns (lists of equal length) and a style per row
    (0 plain, 1 yellow fill, 2 red fill)."""

    def __init__(self, name, header, columns, row_styles=None):
        self.name = name[:31]
        self.header = list(header)
        self.columns = [list(c) for c in columns]
        self.row_styles = row_styles


def _escape(text):
    text = str(text)
    if len(text) > _MAX_CELL_TEXT:
        text = text[:_MAX_CELL_TEXT]
    if _INVALID_XML.search(text):
        text = _INVALID_XML.sub("", text)
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _render_column(values, style=""):
    """XML of each cell of one column; strings are escaped once per distinct value."""
    cache = {}
    out = []
    append = out.append
    for value in values:
        if value is None:
            append(f"<c{style}/>")
        elif isinstance(value, bool):
            append(f'<c{style} t="inlineStr"><is><t>{value}</t></is></c>')
        elif isinstance(value, (int, float)):
            if value != value or value in (float("inf"), float("-inf")):
                append(f'<c{style} t="inlineStr"><is><t>{value}</t></is></c>')
            else:
                append(f"<c{style}><v>{value!r}</v></c>")
        else:
            cell = cache.get(value)
            if cell is None:
                cell = f'<c{style} t="inlineStr"><is><t xml:space="preserve">{_escape(value)}</t></is></c>'
                cache[value] = cell
            append(cell)
    return out


def _sheet_xml(sheet):
    rows = len(sheet.columns[0]) if sheet.columns else 0
    rendered = [_render_column(col) for col in sheet.columns]
    header = "".join(_render_column(sheet.header))
    parts = ['<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
             '<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">'
             '<sheetData>', f"<row>{header}</row>"]
    styles = sheet.row_styles
    if styles is not None and any(styles):
        styled = {}
        for index in (i for i, s in enumerate(styles) if s):
            attr = f' s="{int(styles[index])}"'
            styled[index] = "".join(_render_column([col[index] for col in sheet.columns], attr))
        parts.extend(f"<row>{styled[i]}</row>" if i in styled else f"<row>{''.join(cells)}</row>"
                     for i, cells in enumerate(zip(*rendered)))
    else:
        parts.extend(f"<row>{''.join(cells)}</row>" for cells in zip(*rendered))
    if rows == 0 and not sheet.columns:
        pass
    parts.append("</sheetData></worksheet>")
    return "".join(parts)


_CONTENT_TYPES = ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
                  '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
                  '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
                  '<Default Extension="xml" ContentType="application/xml"/>'
                  '<Override PartName="/xl/workbook.xml" '
                  'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/>'
                  '<Override PartName="/xl/styles.xml" '
                  'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.styles+xml"/>'
                  '{sheets}</Types>')
_SHEET_TYPE = ('<Override PartName="/xl/worksheets/sheet{n}.xml" '
               'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/>')
_ROOT_RELS = ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
              '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
              '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
              'officeDocument" Target="xl/workbook.xml"/></Relationships>')
_STYLES = ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
           '<styleSheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">'
           '<fonts count="1"><font><sz val="11"/><name val="Calibri"/><family val="2"/></font></fonts>'
           '<fills count="4"><fill><patternFill patternType="none"/></fill>'
           '<fill><patternFill patternType="gray125"/></fill>'
           f'<fill><patternFill patternType="solid"><fgColor rgb="{YELLOW_RGB}"/><bgColor rgb="{YELLOW_RGB}"/>'
           '</patternFill></fill>'
           f'<fill><patternFill patternType="solid"><fgColor rgb="{RED_RGB}"/><bgColor rgb="{RED_RGB}"/>'
           '</patternFill></fill></fills>'
           '<borders count="1"><border><left/><right/><top/><bottom/><diagonal/></border></borders>'
           '<cellStyleXfs count="1"><xf numFmtId="0" fontId="0" fillId="0" borderId="0"/></cellStyleXfs>'
           '<cellXfs count="3"><xf numFmtId="0" fontId="0" fillId="0" borderId="0" xfId="0"/>'
           '<xf numFmtId="0" fontId="0" fillId="2" borderId="0" xfId="0" applyFill="1"/>'
           '<xf numFmtId="0" fontId="0" fillId="3" borderId="0" xfId="0" applyFill="1"/></cellXfs>'
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
            for n, sheet in enumerate(sheets, 1):
                archive.writestr(f"xl/worksheets/sheet{n}.xml", _sheet_xml(sheet))
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
