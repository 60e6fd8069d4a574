"""Paths of the reference samples (dumps and the reports msprobe 1.2.1 made from them)."""
import os

SAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "fixtures", "reference_samples")


def sample_dump(name):
    return os.path.join(SAMPLES, name, "step0", "rank", "dump.json")


def sample_report(name):
    return os.path.join(SAMPLES, "compare_outputs", name)


def read_xlsx(path):
    """(header, rows, fill rgb of each row's first cell) read back through openpyxl."""
    import openpyxl

    sheet = openpyxl.load_workbook(path).worksheets[0]
    rows = [[cell.value for cell in row] for row in sheet.iter_rows()]
    fills = [row[0].fill.fgColor.rgb if row[0].fill.fill_type else None for row in sheet.iter_rows()]
    return rows[0], rows[1:], fills[1:]
