"""Every CSV msprobe writes goes through here: cells that a spreadsheet would run as a formula are defused.

A cell that is text starting with `=`, `+`, `-`, `@`, a tab or a carriage return (an API, module or file
name taken from a dump, e.g. `=HYPERLINK(...)` or `=cmd|' /C calc'!A0`) gets a leading `'`, which Excel and
LibreOffice show as text. Text that reads as a number (`-0.5`, `-inf`, `+1e3`) is left alone, so our own
readers and people still see numbers. The xlsx writer needs none of this: it writes inline strings only.
"""
import csv
import io

__all__ = ["safe_cell", "safe_row", "SafeCsvWriter", "csv_line", "csv_text"]

_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def safe_cell(value):
    """`value` unchanged unless it is text a spreadsheet would read as a formula: then "'" + value."""
    if isinstance(value, str) and value.startswith(_FORMULA_STARTS) and not _is_number(value):
        return "'" + value
    return value


def safe_row(cells):
    return [safe_cell(cell) for cell in cells]


class SafeCsvWriter:
    """csv.writer with every cell through safe_cell."""

    def __init__(self, handle, **options):
        self._writer = csv.writer(handle, **options)

    def writerow(self, cells):
        return self._writer.writerow(safe_row(cells))

    def writerows(self, rows):
        for row in rows:
            self._writer.writerow(safe_row(row))


def csv_line(cells, lineterminator: str = "\n") -> str:
    """One CSV record as text."""
    buffer = io.StringIO()
    SafeCsvWriter(buffer, lineterminator=lineterminator).writerow(cells)
    return buffer.getvalue()


def csv_text(header, rows, lineterminator: str = "\n") -> str:
    """A header and rows as CSV text."""
    buffer = io.StringIO()
    writer = SafeCsvWriter(buffer, lineterminator=lineterminator)
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue()
