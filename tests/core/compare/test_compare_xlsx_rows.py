"""The sheet rows the xlsx writer makes in bulk (number blocks from orjson's text, text columns by distinct value,
shared strings numbered in bulk, rows joined a piece at a time) are, cell for cell, what a plain writer that looks
at each cell alone makes: on sheets holding every kind of cell, styled rows, the leading-column cache and any piece
size."""
import re
import zipfile

import numpy as np
import pytest

from msprobe.core.io import xlsx
from msprobe.core.compare.columns import NumberColumn
from msprobe.core.compare.render import NA, _percent
from msprobe.core.io.xlsx import Sheet, write_xlsx


def _numbers(rng, n):
    """Numbers of every form: tiny (repr's and orjson's exponent forms differ), huge, signed zeros, NaN, infinities."""
    values = rng.standard_normal(n) * 10.0 ** rng.integers(-12, 12, n)
    picks = rng.integers(0, n, n // 4)
    values[picks[0::6]], values[picks[1::6]], values[picks[2::6]] = np.nan, np.inf, -np.inf
    values[picks[3::6]], values[picks[4::6]] = -0.0, rng.uniform(-1e-4, 1e-4, len(picks[4::6]))
    values[picks[5::6]] = 1e-7
    return values


def _overrides(rng, n, step):
    """Overrides of every kind: texts needing escape, non-ASCII texts, ints, bools, None, NaN, finite floats."""
    kinds = ["N/A", "a & <b>", "名字 é ☃", "line\nbreak", "ctrl\x01x", 7, -100, 0, True, False, None,
             float("nan"), float("inf"), 0.25, -0.0, "None"]
    return {int(row): kinds[int(rng.integers(0, len(kinds)))] for row in range(0, n, step)}


def _sheets(seed, n=700):
    """A report-like workbook: leading text columns (ASCII and not), number blocks with odd cells, percent
    columns, texts with XML specials, empty and mixed columns, coloured rows; and a second sheet."""
    rng = np.random.default_rng(seed)
    names = [f"Functional.linear.{i % 50}.forward.output.{i % 3}" for i in range(n)]
    lead = [names, [f"Torch.层.{i % 9}" if i % 5 else "x<y>&z" for i in range(n)], ["torch.float32"] * n]
    shared = _overrides(rng, n, 7)
    numbers = [NumberColumn(_numbers(rng, n), shared), NumberColumn(_numbers(rng, n), shared),
               NumberColumn(_numbers(rng, n), _overrides(rng, n, 5))]
    percents = [NumberColumn(np.abs(_numbers(rng, n)), {3: NA}, _percent),
                NumberColumn(_numbers(rng, n), {i: NA for i in range(0, n, 4)}, _percent)]
    mixed = [None if i % 3 else (i if i % 2 else "a<b>&c\nline") for i in range(n)]
    stack = [f"File model.py, line {i % 17}, in forward\n  out = self.ß(x)" for i in range(n)]
    styles = np.array([(i % 7 == 0) * 2 + (i % 11 == 0) + 3 * (i % 13 == 0) for i in range(n)], dtype=np.int8)
    header = ["Name", "Api", "Dtype", "Max", "Min", "Mean", "Rel", "Rel2", "Mixed", "Stack", "Empty"]
    first = Sheet("Result", header, lead + numbers + percents + [mixed, stack, [None] * n], styles,
                  freeze_header=True)
    second = Sheet("Other", ["A", "B"], [NumberColumn(_numbers(rng, 40)), [f"é{i}" for i in range(40)]])
    return [first, second]


def _members(path):
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def _shared_texts(members):
    """The texts of the workbook's shared-string table, in order (as written: escaped)."""
    return re.findall(r'<si><t xml:space="preserve">(.*?)</t></si>', members["xl/sharedStrings.xml"].decode(),
                      flags=re.S)


def _plain_cell(value, style, index_of):
    """The XML of one cell, from its value alone: a finite float its repr, an int in decimal, None empty, a text
    (of the exact type str) its shared-string index, or inline in a styled row; anything else inline text."""
    attr = f' s="{style}"' if style else ""
    kind = type(value)
    if kind is float and value - value == 0.0:
        return f"<c{attr}><v>{value!r}</v></c>"
    if kind is float:
        return f'<c{attr} t="inlineStr"><is><t>{value}</t></is></c>'
    if value is None:
        return f"<c{attr}/>"
    if kind is int:
        return f"<c{attr}><v>{value}</v></c>"
    if kind is str and not style:
        return f'<c t="s"><v>{index_of[xlsx._escape(value)]}</v></c>'
    return f'<c{attr} t="inlineStr"><is><t xml:space="preserve">{xlsx._escape(value)}</t></is></c>'


def _plain_rows(sheet, index_of):
    """The sheet's <row> elements, cell by cell (the title row first)."""
    styles = sheet.row_styles if sheet.row_styles is not None else [0] * len(sheet.columns[0])
    cells = [list(column[:]) for column in sheet.columns]
    rows = ["".join(f'<c t="inlineStr"><is><t xml:space="preserve">{xlsx._escape(title)}</t></is></c>'
                    for title in sheet.header)]
    rows += ["".join(_plain_cell(column[i], int(styles[i]), index_of) for column in cells)
             for i in range(len(cells[0]))]
    return [f"<row>{row}</row>" for row in rows]


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("piece", [128, 5])
def test_sheet_rows_are_those_of_a_cell_by_cell_writer(tmp_path, monkeypatch, seed, piece):
    monkeypatch.setattr(xlsx, "_PIECE_ROWS", piece)
    path, again = str(tmp_path / "a.xlsx"), str(tmp_path / "b.xlsx")
    xlsx._LEAD.clear()
    write_xlsx(path, _sheets(seed))
    write_xlsx(again, _sheets(seed))  # the leading columns from the cache of the first workbook
    made = _members(path)
    assert made == _members(again)
    texts = _shared_texts(made)
    assert len(set(texts)) == len(texts)  # each text stored once
    index_of = {text: i for i, text in enumerate(texts)}
    for n, sheet in enumerate(_sheets(seed), 1):
        xml = made[f"xl/worksheets/sheet{n}.xml"].decode("utf-8")
        rows = re.findall(r"<row>.*?</row>", xml[xml.index("<sheetData>"):], flags=re.S)
        assert rows == _plain_rows(sheet, index_of)
    assert "a &amp; &lt;b&gt;" in texts and "名字 é ☃" in texts
    assert ' s="2"' in made["xl/worksheets/sheet1.xml"].decode() and "<v>1e-07</v>" in made["xl/worksheets/sheet1.xml"].decode()


class _Text(str):
    pass


@pytest.mark.parametrize("values, kinds", [
    ([], 0), (["a"], xlsx._STR), ([None], xlsx._NONE), ([1.0], xlsx._FLOAT), ([1], xlsx._INT), ([True], xlsx._BOOL),
    ([_Text("x")], xlsx._OTHER), ([np.str_("x"), "y"], xlsx._OTHER | xlsx._STR), (("a", "b"), xlsx._STR),
    (["a", None, 1, 2.0, False, b"x", np.float64(1.0)],
     xlsx._STR | xlsx._NONE | xlsx._INT | xlsx._FLOAT | xlsx._BOOL | xlsx._OTHER),
    ([float("nan"), "x", "x", None, None], xlsx._FLOAT | xlsx._STR | xlsx._NONE)])
def test_cell_kinds_are_the_exact_types_of_the_cells(values, kinds):
    assert xlsx._kinds(values) == kinds


def test_a_text_subclass_is_an_inline_string():
    """np.str_ is a str subclass: its cells are inline strings (as _cell makes them), not shared ones."""
    column = [np.str_(f"n{i}") for i in range(30)]
    sheet = Sheet("S", ["A", "B"], [column, NumberColumn(np.arange(30.0))], freeze_header=True)
    strings = xlsx._SharedStrings()
    cells = xlsx._column_cells(column, strings)
    assert cells[0] == '<c t="inlineStr"><is><t xml:space="preserve">n0</t></is></c>' and not strings.texts
    assert xlsx._column_widths(sheet)[0] == 8


def test_first_places_are_each_distinct_key_s_first_place_in_order():
    rng = np.random.default_rng(5)
    for keys in (rng.integers(-3, 4, 5000), rng.integers(0, 2 ** 62, 300), np.zeros(0, dtype=np.int64),
                 np.round(rng.standard_normal(4000), 1).view(np.int64)):
        firsts, inverse = xlsx._first_places(keys)
        seen = {}
        for place, key in enumerate(keys.tolist()):
            seen.setdefault(key, place)
        assert firsts.tolist() == list(seen.values())  # in the order the keys first occur
        assert np.array_equal(keys[firsts][inverse], keys)


def _old_width(title, sample):
    """The width of a column from its first 200 cells, as _column_widths made it cell by cell."""
    return xlsx._width(title, list(sample))


class _Plain:
    """A formatter without a key: texts by each value's bits."""

    def __call__(self, values):
        return [f"<{v!r}>" for v in values.tolist()]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_widths_of_number_columns_are_those_of_their_first_cells(seed):
    rng = np.random.default_rng(seed)
    n = 260
    columns = [NumberColumn(_numbers(rng, n), _overrides(rng, n, 9)), NumberColumn(np.zeros(n), {4: "a long text " * 3}),
               NumberColumn(np.abs(_numbers(rng, n)), {3: NA, 150: "x\nsecond line is longer"}, _percent),
               NumberColumn(_numbers(rng, n), _overrides(rng, n, 6), _Plain()),
               NumberColumn(np.full(n, np.nan), {i: NA for i in range(n)}, _percent), NumberColumn(np.zeros(0))]
    titles = [f"T{k}" * (k + 1) for k in range(len(columns))]
    sheet = Sheet("S", titles, columns, freeze_header=True)
    assert xlsx._column_widths(sheet) == [_old_width(t, c[:xlsx._SAMPLE_ROWS]) for t, c in zip(titles, columns)]


def test_texts_needing_escape_are_escaped_alike_from_the_cache():
    texts = [f"in <module> & line {i}\x01" for i in range(5)] + ["plain"]
    first = xlsx._escape_all(texts)
    assert first == xlsx._escape_all(list(texts)) == list(map(xlsx._escape, texts))
    assert first[0] == "in &lt;module&gt; &amp; line 0"


def test_an_int_block_writes_each_int_in_decimal_between_its_tags():
    ints = np.array([[0, 7, 10], [2 ** 62, 5, 123456789], [2 ** 63 - 1, 99, 1000]], dtype=np.int64)
    head, tail = '<c t="s"><v>', "</v></c>"
    rows = ["".join(f"{head}{v}{tail}" for v in row) for row in ints.tolist()]
    assert xlsx.joined_ints(ints, tail + head, head, tail) == rows
    assert xlsx.joined_ints(ints[[0, 2]], tail + head, head, tail) == [rows[0], rows[2]]
