"""The xlsx writer's bulk paths (number blocks with their odd cells put in, percent columns numbered per
distinct text, widths from one repr call, rows written in pieces) write what a cell-by-cell writer would:
each cell's XML, the shared-string table in the order the cells first use it, the column widths."""
import re
import zipfile
from xml.sax.saxutils import unescape

import numpy as np
import pytest

from msprobe.core.compare.columns import NumberColumn
from msprobe.core.compare.render import NA, _percent
from msprobe.core.io import float_text, xlsx
from msprobe.core.io.xlsx import Sheet, write_xlsx

_CELL = re.compile(r'<c( t="s"| t="inlineStr")?(?: s="\d")?(?:/>|><v>([^<]*)</v></c>|><is><t[^>]*>([^<]*)</t></is></c>)')


def _read(path):
    """(shared strings in table order, rows of cells) of the first sheet, parsed from the XML itself; a cell
    is ('n', number text), ('s', text, index) for a shared string, ('i', text) for an inline one or ('e',)."""
    with zipfile.ZipFile(path) as archive:
        table = [unescape(text) for text in
                 re.findall(r"<si><t[^>]*>([^<]*)</t></si>", archive.read("xl/sharedStrings.xml").decode())]
        sheet = archive.read("xl/worksheets/sheet1.xml").decode()
    rows = []
    for row in re.findall(r"<row>(.*?)</row>", sheet)[1:]:
        cells = []
        for kind, number, inline in _CELL.findall(row):
            if kind == ' t="s"':
                cells.append(("s", table[int(number)], int(number)))
            elif kind:
                cells.append(("i", unescape(inline)))
            else:
                cells.append(("n", number) if number else ("e",))
        rows.append(cells)
    return table, rows


def _expected_cell(cell, shared=True):
    """What a cell of NumberColumn.__getitem__ is in the sheet: a text a shared string (with `shared`), the
    text of anything else but a finite float, an int or None an inline string."""
    if cell is None:
        return ("e",)
    if type(cell) is float and cell - cell == 0:
        return ("n", repr(cell))
    if type(cell) is int:
        return ("n", str(cell))
    return ("s" if shared and type(cell) is str else "i", str(cell))


def _check(path, columns, blocks):
    """Every cell of `columns` is in the sheet as _expected_cell says, and the table holds the texts in the
    order the cells first use them: row by row inside a number block, column by column elsewhere (`blocks`:
    [(first column, end, 'rows' or 'columns')])."""
    table, rows = _read(path)
    n = len(columns[0])
    assert len(rows) == n
    order = []
    for first, end, by in blocks:
        places = [(i, k) for i in range(n) for k in range(first, end)] if by == "rows" else \
            [(i, k) for k in range(first, end) for i in range(n)]
        for i, k in places:
            want, got = _expected_cell(columns[k][i]), rows[i][k]
            assert got[:2] == want, (i, k, want, got)
            if want[0] == "s":
                order.append(want[1])
    assert table == list(dict.fromkeys(order))


def _awkward_numbers(rng, n):
    """Numbers of every kind a report holds: tiny and huge, signed zeros, NaN, infinities."""
    values = rng.standard_normal(n) * 10.0 ** rng.integers(-30, 30, n)
    picks = rng.integers(0, n, n // 5)
    values[picks[0::5]] = np.nan
    values[picks[1::5]] = np.inf
    values[picks[2::5]] = -np.inf
    values[picks[3::5]] = -0.0
    values[picks[4::5]] = 0.0
    return values


def _awkward_overrides(rng, n):
    """Overrides of every kind: texts (some with XML specials), ints, finite floats, NaN, None, bools."""
    kinds = ["N/A", "unsupported", "a & <b>", "[None, 128]", 4, -100, 0.5, -0.0, 1e300, float("nan"), None, True]
    rows = rng.choice(n, n // 4, replace=False)
    return {int(row): kinds[int(rng.integers(0, len(kinds)))] for row in rows}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_number_blocks_hold_each_cell_and_number_texts_row_by_row(tmp_path, seed):
    rng = np.random.default_rng(seed)
    n = 300
    shared = _awkward_overrides(rng, n)  # columns sharing their overrides, as a job's statistics do
    columns = [NumberColumn(_awkward_numbers(rng, n), _awkward_overrides(rng, n)),
               NumberColumn(_awkward_numbers(rng, n), shared), NumberColumn(_awkward_numbers(rng, n), shared),
               NumberColumn(rng.standard_normal(n)), [f"t{i % 7}" for i in range(n)],
               NumberColumn(_awkward_numbers(rng, n), {i: NA for i in range(0, n, 3)})]
    path = str(tmp_path / "blocks.xlsx")
    write_xlsx(path, [Sheet("S", list("ABCDEF"), columns, freeze_header=True)])
    _check(path, columns, [(0, 4, "rows"), (4, 5, "columns"), (5, 6, "rows")])


@pytest.mark.parametrize("chunk, piece", [(7, 3), (64, 5), (5000, 128)])
def test_chunks_and_pieces_of_rows_change_nothing_but_where_rows_are_cut(tmp_path, monkeypatch, chunk, piece):
    """Chunks of 7 rows: a sheet of 4 chunks or more is rendered by forked workers, with inline strings."""
    rng = np.random.default_rng(11)
    n = 200
    columns = [NumberColumn(_awkward_numbers(rng, n), _awkward_overrides(rng, n)),
               NumberColumn(_awkward_numbers(rng, n), _awkward_overrides(rng, n)),
               NumberColumn(np.abs(_awkward_numbers(rng, n)), {3: NA}, _percent),
               NumberColumn(_awkward_numbers(rng, n), {}, _percent)]
    monkeypatch.setattr(xlsx, "_CHUNK_ROWS", chunk)
    monkeypatch.setattr(xlsx, "_PIECE_ROWS", piece)
    path = str(tmp_path / "cut.xlsx")
    write_xlsx(path, [Sheet("S", ["A", "B", "C", "D"], columns)])
    table, rows = _read(path)
    forked = n >= 4 * chunk
    assert [[cell[:2] for cell in row] for row in rows] == \
        [[_expected_cell(column[i], not forked) for column in columns] for i in range(n)]
    order = []  # each chunk's texts: its number block row by row, then its percent columns column by column
    for start in range(0, n, chunk):
        part = range(start, min(n, start + chunk))
        order += [columns[k][i] for i in part for k in range(2)] + [columns[k][i] for k in range(2, 4) for i in part]
    assert table == ([] if forked else list(dict.fromkeys(cell for cell in order if type(cell) is str)))


def _reference_percent(values):
    out = []
    for value in values.tolist():
        rounded = float(np.round(value * 100, 6))
        out.append(NA if rounded != rounded else f"{rounded!r}%")
    return out


def test_percent_texts_are_each_rounded_value_with_a_percent_sign():
    rng = np.random.default_rng(3)
    values = np.concatenate([_awkward_numbers(rng, 2000), [1e306, -1e306, -1e-12, 1e-12, 0.125, 5e-9, 4.9e-9]])
    assert _percent(values) == _reference_percent(values)
    assert _percent(np.zeros(0)) == []


def _keyless(values):
    return [f"{x!r}~" for x in values.tolist()]


@pytest.mark.parametrize("formatter", [_percent, _keyless], ids=["percent", "keyless"])
def test_percent_columns_hold_each_text_numbered_column_by_column(tmp_path, formatter):
    rng = np.random.default_rng(5)
    n = 400
    relative = np.abs(rng.standard_normal((n, 4))) * 10.0 ** rng.integers(-12, 2, (n, 4))
    relative[rng.integers(0, n, 40), rng.integers(0, 4, 40)] = np.nan
    relative[rng.integers(0, n, 10), rng.integers(0, 4, 10)] = np.inf
    relative[rng.integers(0, n, 10), rng.integers(0, 4, 10)] = -0.0
    na = {int(i): NA for i in rng.choice(n, 50, replace=False)}
    columns = [["x"] * n] + [NumberColumn(relative[:, k], na, formatter) for k in range(4)]
    columns[2] = NumberColumn(relative[:, 1], {**na, 3: "0.0%", 5: "a<b"}, formatter)  # texts a value also makes
    path = str(tmp_path / "percent.xlsx")
    write_xlsx(path, [Sheet("S", ["N", "A", "B", "C", "D"], columns, freeze_header=True)])
    _check(path, columns, [(0, 5, "columns")])


def test_a_percent_column_with_a_number_override_is_written_cell_by_cell(tmp_path):
    rng = np.random.default_rng(8)
    columns = [NumberColumn(rng.standard_normal(50), {2: 1.5, 3: None, 4: NA}, _percent),
               NumberColumn(rng.standard_normal(50), {}, _percent)]
    path = str(tmp_path / "mixed.xlsx")
    write_xlsx(path, [Sheet("S", ["A", "B"], columns)])
    _check(path, columns, [(0, 2, "columns")])


def test_column_widths_of_number_columns_are_those_of_their_first_cells():
    rng = np.random.default_rng(9)
    columns = [NumberColumn(_awkward_numbers(rng, 500), _awkward_overrides(rng, 500)),
               NumberColumn(rng.standard_normal(500) * 1e-3), NumberColumn(np.arange(10.0)),
               NumberColumn(np.full(300, np.nan), {1: "a much longer text\nsecond line", 2: 7}),
               NumberColumn(np.zeros(0)), NumberColumn(np.ones(300), {i: NA for i in range(300)}),
               NumberColumn(rng.standard_normal(300), {0: "x" * 90})]
    titles = ["A", "Bench l2norm", "C", "D", "E", "F", "G"]
    sheet = Sheet("S", titles, columns, freeze_header=True)
    assert xlsx._column_widths(sheet) == [xlsx._width(t, c[:xlsx._SAMPLE_ROWS]) for t, c in zip(titles, columns)]


def test_rows_of_ints_are_joined_as_python_writes_them(monkeypatch):
    rng = np.random.default_rng(4)
    rows = rng.integers(0, 2 ** 40, (500, 3)) // 10 ** rng.integers(0, 12, (500, 3))
    expected = ["<" + "|".join(map(str, row)) + ">" for row in rows.tolist()]
    assert float_text.joined_ints(rows, "|", "<", ">") == expected
    assert float_text.joined_ints([tuple(row) for row in rows.tolist()], "|", "<", ">") == expected
    monkeypatch.setattr(float_text, "orjson", None)  # without orjson: joined row by row
    assert float_text.joined_ints(rows, "|", "<", ">") == expected
    assert float_text.joined_ints(np.zeros((0, 3), dtype=np.int64), "|") == []
