"""The streaming xlsx writer reads back through openpyxl with values, escapes and fills intact."""
import math

import openpyxl

from msprobe.core.io.xlsx import RED_RGB, YELLOW_RGB, Sheet, write_xlsx


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


def test_text_is_stored_once_in_the_shared_string_table(tmp_path):
    import zipfile

    import pandas as pd

    path = str(tmp_path / "s.xlsx")
    names = [f"Functional.linear.{i % 7}.forward.output.0" for i in range(300)]
    write_xlsx(path, [Sheet("Sheet", ["NPU Name", "Bench Name", "Note"], [names, list(names), ["N/A"] * 300],
                            [0] * 299 + [2], freeze_header=True),
                      Sheet("Second", ["Note"], [["N/A", " lead"]])])
    with zipfile.ZipFile(path) as archive:
        table = archive.read("xl/sharedStrings.xml").decode()
        sheet_xml = archive.read("xl/worksheets/sheet1.xml").decode()
    for text in ["N/A", " lead"] + sorted(set(names)):
        assert table.count(f">{text}<") == 1, text  # each distinct string once, for both sheets
    assert "Functional.linear.3" not in sheet_xml.split("</row>", 299)[-2]  # plain rows index the table
    book = openpyxl.load_workbook(path)
    rows = [[c.value for c in row] for row in book["Sheet"].iter_rows()]
    assert rows[1:] == [[n, n, "N/A"] for n in names]
    assert book["Sheet"].cell(301, 1).fill.fgColor.rgb == RED_RGB
    assert [[c.value for c in row] for row in book["Second"].iter_rows()] == [["Note"], ["N/A"], [" lead"]]
    frame = pd.read_excel(path, sheet_name="Sheet")  # as 1.2.1's tools read reports
    assert list(frame.columns) == ["NPU Name", "Bench Name", "Note"] and frame["NPU Name"].tolist() == names


def test_number_columns_render_their_text_and_non_finite_cells(tmp_path):
    from msprobe.core.compare.columns import NumberColumn

    path = str(tmp_path / "n.xlsx")
    values = [0.5, float("inf"), 2.0, float("nan"), -0.0, 7.25]
    column = NumberColumn(values, {2: "N/A", 4: 3, 5: 1.75})
    write_xlsx(path, [Sheet("Sheet", ["Max"], [column])])
    cells = [row[0].value for row in openpyxl.load_workbook(path)["Sheet"].iter_rows(min_row=2)]
    assert cells == [0.5, "inf", "N/A", "nan", 3, 1.75]


def test_writing_a_report_leaves_no_reference_cycles(tmp_path):
    """A pair runs with gc's young threshold raised (pair.compare_pair): garbage in cycles, such as a
    report's string table, would pile up over the pairs of a job instead of being freed at once."""
    import gc

    from msprobe.core.compare.columns import NumberColumn

    columns = [["a", "b", None] * 100, NumberColumn([1.0, float("nan"), 2.5] * 100, {1: "N/A"}), [1.5, "x", None] * 100]
    sheet = Sheet("Sheet", ["A", "B", "C"], columns, [0, 1, 2] * 100, freeze_header=True)
    write_xlsx(str(tmp_path / "warm.xlsx"), [sheet])
    gc.collect()
    gc.disable()
    try:
        write_xlsx(str(tmp_path / "r.xlsx"), [sheet])
        assert gc.collect() == 0
    finally:
        gc.enable()
