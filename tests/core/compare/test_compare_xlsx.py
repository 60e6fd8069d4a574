"""The streaming xlsx writer reads back through openpyxl with values, escapes and fills intact."""
import math

import openpyxl

from msprobe.core.compare.xlsx import RED_RGB, YELLOW_RGB, Sheet, write_xlsx


def test_round_trip_values_and_fills(tmp_path):
    path = str(tmp_path / "r.xlsx")
    columns = [["a<b>&c", "x\x01y", None], [1.5, float("nan"), 3], [True, "['File a, line 1, \\n x']", -0.0]]
    write_xlsx(path, [Sheet("Sheet", ["Name", "Value", "Other"], columns, [0, 1, 2]),
                      Sheet("Second", ["Only"], [["z"]])])
    book = openpyxl.load_workbook(path)
    assert book.sheetnames == ["Sheet", "Second"]
    sheet = book["Sheet"]
    rows = [[c.value for c in row] for row in sheet.iter_rows()]
    assert rows[0] == ["Name", "Value", "Other"]
    assert rows[1] == ["a<b>&c", 1.5, "True"]
    assert rows[2][0] == "xy" and rows[2][1] == "nan"
    assert rows[3][:2] == [None, 3]
    assert sheet.cell(2, 1).fill.fill_type is None
    assert sheet.cell(3, 2).fill.fgColor.rgb == YELLOW_RGB
    assert sheet.cell(4, 3).fill.fgColor.rgb == RED_RGB
    assert not math.isnan(rows[3][2])
    assert [[c.value for c in row] for row in book["Second"].iter_rows()] == [["Only"], ["z"]]
