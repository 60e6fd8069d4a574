"""float_text formats floats in bulk exactly as repr() does, with orjson and without, so reports keep their bytes."""
import os
import re
import subprocess
import sys
import zipfile

import numpy as np
import pytest

from msprobe.core.io import float_text
from msprobe.core.compare.columns import NumberColumn
from msprobe.core.io.float_text import float_reprs, joined_reprs
from msprobe.core.io.xlsx import Sheet, write_xlsx


def _values_of_every_form():
    """Finite floats of every magnitude and form: random bit patterns, every decimal exponent, the range
    where repr and orjson place the exponent differently, subnormals, signed zeros, widened float32s."""
    rng = np.random.default_rng(7)
    bits = rng.integers(0, 2 ** 64, size=200_000, dtype=np.uint64).view(np.float64)
    spread = rng.standard_normal(200_000) * 10.0 ** rng.integers(-40, 40, 200_000)
    small = rng.uniform(-2e-4, 2e-4, 100_000)
    widened = (rng.standard_normal(50_000).astype(np.float32).astype(np.float64)
               * 10.0 ** rng.integers(-12, 20, 50_000))
    edges = np.array([0.0, -0.0, 5e-324, -5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 1e-4, 1e-5,
                      9.999999999999999e-05, 1e-6, 1e-7, 1e16, 9999999999999998.0, 1e15, 10.00001, 100.000001])
    values = np.concatenate([bits, spread, small, widened, edges])
    return values[np.isfinite(values)]


def test_float_reprs_equal_repr_for_every_magnitude():
    values = _values_of_every_form()
    assert float_reprs(values) == list(map(repr, values.tolist()))
    assert float_reprs(values.tolist()[:1000]) == list(map(repr, values.tolist()[:1000]))
    assert float_reprs([]) == []


@pytest.mark.parametrize("width", [1, 4, 8])
def test_joined_reprs_equal_the_repr_of_each_row(width):
    values = _values_of_every_form()
    rows = values[: len(values) // width * width].reshape(-1, width)
    expected = ["<c><v>" + "</v></c><c><v>".join(map(repr, row)) + "</v></c>" for row in rows.tolist()]
    assert joined_reprs(rows, "</v></c><c><v>", "<c><v>", "</v></c>") == expected
    assert joined_reprs(np.zeros((0, width)), ",x", "<", ">") == []


def _without_orjson(monkeypatch):
    monkeypatch.setattr(float_text, "orjson", None)
    monkeypatch.setattr(float_text, "_FAST", [])


def test_without_orjson_the_texts_are_the_same(monkeypatch):
    values = _values_of_every_form()[:50_000]
    fast_flat, fast_rows = float_reprs(values), joined_reprs(values.reshape(-1, 5), "|", "[", "]")
    _without_orjson(monkeypatch)
    assert float_reprs(values) == fast_flat == list(map(repr, values.tolist()))
    assert joined_reprs(values.reshape(-1, 5), "|", "[", "]") == fast_rows


def _mixed_sheet():
    """A report-like sheet: number columns with NaN, infinities, signed zeros, overrides (text, ints, floats)
    and a formatter; plain columns of floats, texts, empties and a mix; coloured rows."""
    rng = np.random.default_rng(3)
    rows = 700
    values = rng.standard_normal((rows, 3)) * 10.0 ** rng.integers(-9, 9, (rows, 3))
    values[::37, 0], values[5::41, 1], values[::53, 2] = np.nan, np.inf, -0.0
    overrides = [{i: "N/A" for i in range(0, rows, 11)}, {i: i for i in range(3, rows, 17)},
                 {i: float(i) / 7 for i in range(1, rows, 13)}]
    numbers = [NumberColumn(values[:, k], overrides[k]) for k in range(3)]
    percent = NumberColumn(values[:, 0], {2: "N/A"}, lambda v: [f"{x}%" for x in np.round(v * 100, 6).tolist()])
    floats = [float(v) if i % 29 else "unsupported" for i, v in enumerate(values[:, 1])]
    texts = [f"Functional.linear.{i % 40}.forward.output.0" if i % 9 else None for i in range(rows)]
    mixed = [None if i % 3 else (i if i % 2 else "a<b>&c\nline") for i in range(rows)]
    styles = np.array([(i % 7 == 0) * 2 + (i % 11 == 0) for i in range(rows)], dtype=np.int8)
    header = ["Max diff", "Min diff", "Mean diff", "Rel", "Cosine", "Name", "Err_message"]
    return Sheet("Sheet", header, numbers + [percent, floats, texts, mixed], styles, freeze_header=True)


def _members(path):
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def test_xlsx_bytes_are_the_same_with_and_without_orjson(tmp_path, monkeypatch):
    fast, plain = str(tmp_path / "fast.xlsx"), str(tmp_path / "plain.xlsx")
    write_xlsx(fast, [_mixed_sheet()])
    _without_orjson(monkeypatch)
    write_xlsx(plain, [_mixed_sheet()])
    assert _members(fast) == _members(plain)


def test_number_cells_hold_the_repr_of_their_value(tmp_path):
    values = _values_of_every_form()[:3000]
    path = str(tmp_path / "n.xlsx")
    write_xlsx(path, [Sheet("Sheet", ["A", "B"], [NumberColumn(values[:1500]), NumberColumn(values[1500:])])])
    sheet = _members(path)["xl/worksheets/sheet1.xml"].decode()
    texts = re.findall(r"<c><v>([^<]*)</v></c>", sheet)
    assert texts == [repr(v) for pair in zip(values[:1500].tolist(), values[1500:].tolist()) for v in pair]


def _real_statistics():
    """Every Max/Min/Mean/Norm of the reference samples' dumps (real runs of 1.2.1 and of msprobe)."""
    import glob
    import json

    from compare_samples import SAMPLES

    found = []

    def walk(node):
        if isinstance(node, dict):
            found.extend(v for k, v in node.items() if k in ("Max", "Min", "Mean", "Norm") and type(v) is float)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
    for path in glob.glob(os.path.join(SAMPLES, "*", "step*", "rank*", "dump.json")):
        with open(path) as handle:
            walk(json.load(handle))
    values = np.array(found, dtype=np.float64)
    return values[np.isfinite(values)]


def test_the_c_rewrite_equals_the_python_rewrite_on_every_form():
    """_native._pair.json_floats_as_repr against float_text's Python rewrite (the reference), on orjson's text
    of values of every form and of the reference samples' statistics, 1-d and 2-d, and the finished texts against
    repr."""
    import orjson

    from msprobe._native._pair import json_floats_as_repr

    values = _values_of_every_form()
    more = np.array([float(2 ** 60), float(-(2 ** 53) - 2), 123456789012345680.0, 0.1, -0.1, 1e-5, -1e-5, 1e-7,
                     -1e-7, 1.5e-6, 2.5e-300, 1e22, 1e16, -1e16, 1e308, float("inf"), float("-inf"), float("nan")])
    real = _real_statistics()
    for array in (values, more, values[: len(values) // 6 * 6].reshape(-1, 6), more[:16].reshape(4, 4), real,
                  real[: len(real) // 4 * 4].reshape(-1, 4)):
        text = orjson.dumps(array, option=orjson.OPT_SERIALIZE_NUMPY)
        assert json_floats_as_repr(text) == float_text._rewritten(text)
    assert float_text._orjson_reprs(real) == list(map(repr, real.tolist()))
    finite = more[np.isfinite(more)]
    assert float_text._orjson_reprs(finite) == list(map(repr, finite.tolist()))
    for text in (b"", b"[]", b"[0.00001]", b"[10.00001,-0.00001]", b"[1e-7]", b"[[5e-7,1.0],[0.0001,-0.00005]]",
                 b"-", b"0.0000"):
        assert json_floats_as_repr(text) == float_text._rewritten(text)


def test_native_text_rewrite_is_off_with_msprobe_native_stats_0():
    code = "from msprobe.core.io import float_text; print(float_text._NATIVE is None)"
    out = {flag: subprocess.run([sys.executable, "-c", code], env={**os.environ, "MSPROBE_NATIVE_STATS": flag},
                                capture_output=True, text=True, check=True).stdout.strip() for flag in ("0", "1")}
    assert out == {"0": "True", "1": "False"}


@pytest.mark.parametrize("width", [1, 3, 8, 12])
def test_rows_joined_from_orjson_text_equal_repr_of_each_row(width):
    """float_text._orjson_joined (orjson's text rewritten to repr's, then cut into rows by str.replace) against
    head + sep.join(map(repr, row)) + tail, row by row: every row once, the first rows with other separators."""
    values = _values_of_every_form()
    rows = values[: len(values) // width * width].reshape(-1, width)
    assert float_text._orjson_joined(rows, "|", "<", ">") == float_text._repr_joined(rows, "|", "<", ">")
    for sep, head, tail in (("</v></c><c><v>", "<c><v>", "</v></c>"), ("", "", "")):
        made = float_text._orjson_joined(rows[:2000], sep, head, tail)
        assert made == [head + sep.join(map(repr, row)) + tail for row in rows[:2000].tolist()]
