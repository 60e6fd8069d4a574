"""The xlsx writer keeps the cells and shared strings of a sheet's leading text columns for the next sheet
whose leading columns are equal (a job's reports): every file must be what the writer makes without it."""
import zipfile

import numpy as np

from msprobe.core.compare.columns import NumberColumn
from msprobe.core.io import xlsx
from msprobe.core.io.xlsx import Sheet, write_xlsx


def _sheet(seed, names, styles=None):
    rng = np.random.default_rng(seed)
    rows = len(names)
    columns = [list(names), [f"torch.float{32 if i % 3 else 16}" for i in range(rows)],
               NumberColumn(rng.standard_normal(rows), {1: "N/A"}), NumberColumn(rng.standard_normal(rows)),
               [f"note {i % 4} & <{seed}>" for i in range(rows)]]
    return Sheet("Sheet", ["Name", "Dtype", "A", "B", "Note"], columns, styles, freeze_header=True)


def _members(path):
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def test_sheets_written_one_after_another_equal_sheets_written_alone(tmp_path, monkeypatch):
    restored = []
    original = xlsx._SharedStrings.restore
    monkeypatch.setattr(xlsx._SharedStrings, "restore", lambda self, snap: restored.append(1) or original(self, snap))
    names = [f"Functional.linear.{i}.forward.input.0" for i in range(300)]
    other = list(names)
    other[7] = "Functional.relu.7.forward.input.0"
    styles = np.zeros(300, dtype=np.int8)
    styles[[0, 5, 299]] = [2, 1, 5]
    sheets = [_sheet(1, names), _sheet(2, names, styles), _sheet(3, names), _sheet(4, other), _sheet(5, names),
              _sheet(6, [1.0 if i == 3 else n for i, n in enumerate(names)])]
    xlsx._LEAD.clear()
    for n, sheet in enumerate(sheets):
        write_xlsx(str(tmp_path / f"after{n}.xlsx"), [sheet])
    assert len(restored) == 2  # sheets 1 and 2 reuse sheet 0's leading cells; 3 differs, 4 follows 3, 5 has a float
    for n, sheet in enumerate(sheets):
        xlsx._LEAD.clear()
        write_xlsx(str(tmp_path / f"alone{n}.xlsx"), [sheet])
        assert _members(tmp_path / f"after{n}.xlsx") == _members(tmp_path / f"alone{n}.xlsx"), n
    assert b' s="2"' in _members(tmp_path / "alone1.xlsx")["xl/worksheets/sheet1.xml"]
    assert b' s="' not in _members(tmp_path / "alone2.xlsx")["xl/worksheets/sheet1.xml"]
