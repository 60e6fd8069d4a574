"""The C row writer (_pair_kernels.xml_rows) and kinds test (cell_kinds) write the very bytes of the Python path
they replace (xlsx._chunk_xml's joining, set(map(type, ...))): every member of the workbook, on sheets holding
every kind of cell; malformed blocks are refused, not written wrong."""
import os
import subprocess
import sys
import zipfile

import numpy as np
import orjson
import pytest

from msprobe.core import _pair_kernels
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


def _python_path(monkeypatch):
    monkeypatch.setattr(xlsx, "_NATIVE_XML", None)
    monkeypatch.setattr(xlsx, "_NATIVE_KINDS", None)
    monkeypatch.setattr(xlsx, "_NATIVE_FIRSTS", None)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("piece", [128, 5])
def test_workbook_bytes_are_the_same_with_the_c_rows_and_the_python_rows(tmp_path, monkeypatch, seed, piece):
    monkeypatch.setattr(xlsx, "_PIECE_ROWS", piece)
    native, python = str(tmp_path / "c.xlsx"), str(tmp_path / "py.xlsx")
    xlsx._LEAD.clear()
    write_xlsx(native, _sheets(seed))
    write_xlsx(native + "2", _sheets(seed))  # the leading columns from the cache of the first workbook
    _python_path(monkeypatch)
    xlsx._LEAD.clear()
    write_xlsx(python, _sheets(seed))
    made = _members(native)
    assert made == _members(python) == _members(native + "2")
    sheet = made["xl/worksheets/sheet1.xml"].decode("utf-8")
    assert 'a &amp; &lt;b&gt;' in made["xl/sharedStrings.xml"].decode() and "名字 é ☃" in made["xl/sharedStrings.xml"].decode()
    assert ' s="2"' in sheet and ' s="5"' in sheet and "<v>1e-07</v>" in sheet


def test_pieces_hold_piece_rows_rows_each():
    rows = [f"<c><v>{i}</v></c>" for i in range(10)]
    pieces = _pair_kernels.xml_rows([rows], 10, 4, None)
    assert [piece.count(b"<row>") for piece in pieces] == [4, 4, 2]
    assert b"".join(pieces) == "".join(f"<row>{cell}</row>" for cell in rows).encode()


def _block(values, places=(), cells=()):
    """A block of xml_rows: orjson's text of `values` (2-d float64), NaN at the places of the odd cells."""
    values = np.array(values, dtype=np.float64)
    return (orjson.dumps(values, option=orjson.OPT_SERIALIZE_NUMPY), "<c><v>", "</v></c>",
            np.array(places, dtype=np.int64).tobytes(), list(cells), values.shape[1])


def test_a_block_writes_each_number_as_repr_and_its_odd_cells_in_place():
    values = [[1e-7, np.nan, 0.00001234], [np.nan, np.nan, -1.5e-300], [10.00001, -0.0, 1e16]]
    part = _block(values, [1, 3, 4], ["<c/>", '<c t="s"><v>0</v></c>', "<c><v>7</v></c>"])
    styled = [(2, "<c s=\"2\"/>")]
    made = b"".join(_pair_kernels.xml_rows([part, ["<c>é</c>"] * 3], 3, 128, styled)).decode()
    assert made == ("<row><c><v>1e-07</v></c><c/><c><v>1.234e-05</v></c><c>é</c></row>"
                    '<row><c t="s"><v>0</v></c><c><v>7</v></c><c><v>-1.5e-300</v></c><c>é</c></row>'
                    '<row><c s="2"/></row>')


@pytest.mark.parametrize("part, count, message", [
    (_block([[1.0, 2.0]], [0], ["<c/>"]), 1, "holds no null"),
    (_block([[1.0, 2.0]]), 2, "does not hold count rows"),
    (_block([[1.0, 2.0], [3.0, 4.0]]), 1, "more than count rows"),
    (_block([[np.nan, 2.0]], [0], []), 1, "a cell per place"),
    (["<c/>"], 2, "a cell text per row"),
])
def test_malformed_parts_are_refused(part, count, message):
    with pytest.raises(ValueError, match=message):
        _pair_kernels.xml_rows([part], count, 128, None)


def test_cells_must_be_texts_and_styled_rows_ascending():
    with pytest.raises(TypeError):
        _pair_kernels.xml_rows([[1]], 1, 128, None)
    for styled in ([(2, "<c/>"), (1, "<c/>")], [(0, "<c/>"), (0, "<c/>")], [(3, "<c/>")]):
        with pytest.raises(ValueError, match="ascending rows below count"):
            _pair_kernels.xml_rows([["<c/>"] * 3], 3, 128, styled)


class _Text(str):
    pass


@pytest.mark.parametrize("values", [[], ["a"], [None], [1.0], [1], [True], [_Text("x")], [np.str_("x"), "y"],
                                    ["a", None, 1, 2.0, False, b"x", np.float64(1.0)], ("a", "b"),
                                    [float("nan"), "x", "x", None, None]])
def test_cell_kinds_are_the_exact_types_of_the_cells(values):
    assert _pair_kernels.cell_kinds(values) == xlsx._python_kinds(values)


def test_a_text_subclass_is_no_text_column_in_either_path(tmp_path, monkeypatch):
    """np.str_ is a str subclass: its cells are inline strings (as _cell makes them), in both paths."""
    column = [np.str_(f"n{i}") for i in range(30)]
    sheets = [Sheet("S", ["A", "B"], [column, NumberColumn(np.arange(30.0))], freeze_header=True)]
    native, python = str(tmp_path / "c.xlsx"), str(tmp_path / "py.xlsx")
    write_xlsx(native, sheets)
    _python_path(monkeypatch)
    write_xlsx(python, sheets)
    assert _members(native) == _members(python)
    assert b'<c t="inlineStr"><is><t xml:space="preserve">n0</t>' in _members(native)["xl/worksheets/sheet1.xml"]


def test_native_rows_are_off_with_msprobe_native_stats_0():
    code = ("from msprobe.core.io import xlsx; "
            "print(xlsx._NATIVE_XML is None, xlsx._NATIVE_KINDS is None, xlsx._NATIVE_FIRSTS is None)")
    out = {flag: subprocess.run([sys.executable, "-c", code], env={**os.environ, "MSPROBE_NATIVE_STATS": flag},
                                capture_output=True, text=True, check=True).stdout.strip() for flag in ("0", "1")}
    assert out == {"0": "True True True", "1": "False False False"}


def test_first_places_are_each_distinct_key_s_first_place_in_order():
    rng = np.random.default_rng(5)
    for keys in (rng.integers(-3, 4, 5000), rng.integers(0, 2 ** 62, 300), np.zeros(0, dtype=np.int64),
                 np.round(rng.standard_normal(4000), 1).view(np.int64)):
        keys = np.ascontiguousarray(keys, dtype=np.int64)
        firsts, inverse = (np.frombuffer(made, dtype=np.int64) for made in _pair_kernels.first_places(keys))
        _, reference = np.unique(keys, return_index=True)
        assert firsts.tolist() == sorted(reference.tolist())  # numpy's, in the order the keys first occur
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
    ints = np.array([[0, 7, 10], [2 ** 62, -5, 123456789], [-(2 ** 63), 99, 1000]], dtype=np.int64)
    part = (ints.tobytes(), '<c t="s"><v>', "</v></c>", 3)
    made = b"".join(_pair_kernels.xml_rows([part], 3, 2, [(1, "<c/>")])).decode()
    head, tail = '<c t="s"><v>', "</v></c>"
    rows = ["".join(f"{head}{v}{tail}" for v in row) for row in ints.tolist()]
    assert made == f"<row>{rows[0]}</row><row><c/></row><row>{rows[2]}</row>"
    assert xlsx.joined_ints(ints[[0, 2]], tail + head, head, tail) == [rows[0], rows[2]]
    with pytest.raises(ValueError, match="count rows of width int64"):
        _pair_kernels.xml_rows([part], 2, 128, None)
