"""CSV files: every CSV msprobe writes goes through here: cells that a spreadsheet would run as a formula are defused.

A cell that is text starting with `=`, `+`, `-`, `@`, a tab or a carriage return (an API, module or file
name taken from a dump, e.g. `=HYPERLINK(...)` or `=cmd|' /C calc'!A0`) gets a leading `'`, which Excel and
LibreOffice show as text. Text that reads as a number (`-0.5`, `-inf`, `+1e3`) is left alone, so our own
readers and people still see numbers. The xlsx writer needs none of this: it writes inline strings only.
Column titles are ours and written as they are (`write_header`). `read_csv_rows` reads a CSV back, turning
a binary file or a field over the csv module's limit into one ParseError line.
"""
import csv
import io

from msprobe.core.errors import ParseError

__all__ = ["safe_cell", "safe_row", "SafeCsvWriter", "csv_line", "csv_text", "read_csv_rows"]

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


def _breaks_line(cell) -> bool:
    return isinstance(cell, str) and ("\r" in cell or "\n" in cell)


class SafeCsvWriter:
    """csv.writer with every cell through safe_cell.

    A row with a CR or LF inside a cell is written with every cell quoted: csv.writer quotes only the
    characters of its own line terminator, so a CR in a name written with "\n" lines would start a new row
    (and that row's first cell could be a formula)."""

    def __init__(self, handle, **options):
        self._writer = csv.writer(handle, **options)
        self._quoting_all = csv.writer(handle, **{**options, "quoting": csv.QUOTE_ALL})

    def writerow(self, cells):
        row = safe_row(cells)
        writer = self._quoting_all if any(_breaks_line(cell) for cell in row) else self._writer
        return writer.writerow(row)

    def writerows(self, rows):
        for row in rows:
            self.writerow(row)

    def write_header(self, titles):
        """Our own column titles, written as they are: grad_probe's 1.2.1 header has a column called `=0`."""
        return self._writer.writerow(titles)


def csv_line(cells, lineterminator: str = "\n") -> str:
    """One CSV record as text."""
    buffer = io.StringIO()
    SafeCsvWriter(buffer, lineterminator=lineterminator).writerow(cells)
    return buffer.getvalue()


def csv_text(header, rows, lineterminator: str = "\n") -> str:
    """A header and rows as CSV text."""
    buffer = io.StringIO()
    writer = SafeCsvWriter(buffer, lineterminator=lineterminator)
    writer.write_header(header)
    writer.writerows(rows)
    return buffer.getvalue()


def read_csv_rows(path: str, what: str = "CSV file") -> list:
    """All rows of a CSV file (BOM tolerated) as lists of strings; a file that is not UTF-8 CSV is a ParseError."""
    try:
        with open(path, encoding="utf-8-sig", newline="") as handle:
            return list(csv.reader(handle))
    except UnicodeDecodeError:
        raise ParseError(f"{what} '{path}' is not UTF-8 text; is it the right file?") from None
    except csv.Error as exc:
        raise ParseError(f"{what} '{path}' is not a readable CSV file ({exc}).") from None
    except OSError as exc:
        raise ParseError(f"{what} '{path}' cannot be read: {exc.strerror}.") from None
