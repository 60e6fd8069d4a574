"""repr() of many floats at once, several times faster: the text a report cell shows for a number.

Python's repr(float) (the shortest text that reads back as the same float) costs about 1 us a value
here: a statistics report of 2,000 rows has 16 number columns, ~35k values, and formatting them
was the largest cost of writing its xlsx. orjson writes the same shortest digits (Ryu) for a whole
array in one C call; its text differs from repr only in the exponent's form, which is rewritten in
bulk: 1e-7 -> 1e-07 (repr pads the exponent to two digits) and 0.0000123 -> 1.23e-05 (repr uses
the exponent from 1e-5 down, orjson from 1e-7). On first use the result is checked against repr on
values of every magnitude; without orjson, or if an orjson release writes anything else, repr is used.
"""
import random
import re

import numpy as np

from msprobe._native import load

try:
    import orjson
except ImportError:  # pragma: no cover - orjson is a base dependency
    orjson = None  # type: ignore[assignment]

__all__ = ["float_reprs", "joined_reprs", "joined_ints"]

# the C form of the two rewrites (msprobe._native._pair, _pair.c: bytes in, text out); MSPROBE_NATIVE_STATS=0 or a
# build without a C compiler: _rewritten
_KERNELS = load("_pair")
_NATIVE = None if _KERNELS is None else _KERNELS.json_floats_as_repr

_FIXED_SMALL = re.compile(r"0\.0000[0-9]+")  # a value in (-1e-4, 1e-4) orjson writes without exponent
_COMMA, _CLOSE, _MINUS, _ZERO = (ord(c) for c in ",]-0")


def _scientific(match):
    """'0.0000123' -> '1.23e-05' (a sign before it stays); '10.00001' and the like are left alone."""
    text = match.group()
    if match.start() and match.string[match.start() - 1].isdigit():
        return text
    fraction = text[2:]
    digits = fraction.lstrip("0")
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return f"{mantissa}e-{len(fraction) - len(digits) + 1:02d}"


def _repr_json(array):
    """orjson's JSON text of a float64 array (1-d or 2-d), rewritten so that every number reads as its repr."""
    data = orjson.dumps(array, option=orjson.OPT_SERIALIZE_NUMPY)
    return _NATIVE(data) if _NATIVE is not None else _rewritten(data)


def _rewritten(data):
    """The two rewrites in Python (the reference the C form is tested against)."""
    data = np.frombuffer(data, np.uint8)
    ends = np.flatnonzero((data == _COMMA) | (data == _CLOSE))  # the byte after each number
    short = ends[data[ends - 2] == _MINUS] - 1  # e-7: the exponent's one digit
    text = (np.insert(data, short, _ZERO) if len(short) else data).tobytes().decode()
    return _FIXED_SMALL.sub(_scientific, text) if "0.0000" in text else text


def _orjson_reprs(values):
    if not len(values):
        return []
    return _repr_json(np.ascontiguousarray(values, dtype=np.float64))[1:-1].split(",")


def _rows_of(text, sep, head, tail):
    """The rows of the JSON text of a 2-d array ('[[a,b],[c,d]]'), each as head + its numbers joined by sep + tail:
    one str.replace and one split over the whole text (numbers hold no comma and no bracket; sep holds no bracket)."""
    rows = text[2:-2].replace(",", sep).split("]" + sep + "[")
    return [head + row + tail for row in rows] if head or tail else rows


def _orjson_joined(array, sep, head, tail):
    if not len(array):
        return []
    return _rows_of(_repr_json(np.ascontiguousarray(array, dtype=np.float64)), sep, head, tail)


def _repr_reprs(values):
    return list(map(repr, np.asarray(values, dtype=np.float64).tolist()))


def _repr_joined(array, sep, head, tail):
    return [head + sep.join(map(repr, row)) + tail for row in np.asarray(array, dtype=np.float64).tolist()]


def _checked_values():
    """Values whose text takes every form repr has: each decimal exponent, the switches to and from the
    exponent form, subnormals, the largest float, negative zero, float32 values widened."""
    rng = random.Random(20261125)
    values = [0.0, -0.0, 1.0, -1.0, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 9007199254740993.0,
              10.00001, 100.000001, 1.00001e-5]
    for exponent in range(-323, 308):
        values += [10.0 ** exponent, 1.5 * 10.0 ** exponent]
    for exponent in range(-8, 18):
        values += [rng.random() * 10.0 ** exponent for _ in range(20)]
        values += [float(int(rng.random() * 10 ** 6)) * 10.0 ** exponent for _ in range(5)]
        values += [float(np.float32(rng.random() * 10.0 ** exponent)) for _ in range(5)]
    values += [rng.uniform(-1e-3, 1e-3) for _ in range(200)]
    values += [-v for v in values]
    return values[: len(values) // 4 * 4]


def _fast_path_agrees():
    if orjson is None:
        return False
    values = _checked_values()
    rows = np.array(values).reshape(-1, 4)
    try:
        return (_orjson_reprs(values) == _repr_reprs(values)
                and _orjson_joined(rows, "|", "<", ">") == _repr_joined(rows, "|", "<", ">"))
    except Exception:  # noqa: BLE001 - any surprise from another orjson release: use repr
        return False


_FAST: list = []  # whether the orjson path agrees, checked on first use (commands writing no report never pay)


def _fast():
    if not _FAST:
        _FAST.append(_fast_path_agrees())
    return _FAST[0]


def float_reprs(values):
    """repr() of each float of `values` (a list or a float64 array; any text for NaN and infinities)."""
    return _orjson_reprs(values) if _fast() else _repr_reprs(values)


def joined_reprs(array, sep, head="", tail=""):
    """Per row of the 2-d float array: head + the repr of each value joined by sep + tail (any text for
    NaN and infinities). sep must hold no bracket."""
    return _orjson_joined(array, sep, head, tail) if _fast() else _repr_joined(array, sep, head, tail)


def _python_ints(rows, sep, head, tail):
    return [head + sep.join(map(str, row)) + tail for row in (rows.tolist() if hasattr(rows, "tolist") else rows)]


def _orjson_ints(rows, sep, head, tail):
    """_python_ints from orjson's text of all rows (ints are written in decimal as str writes them), joined by
    _rows_of: no Python step a row."""
    return _rows_of(orjson.dumps(rows, option=orjson.OPT_SERIALIZE_NUMPY).decode(), sep, head, tail)


def joined_ints(rows, sep, head="", tail=""):
    """Per row of `rows` (equal-length sequences of non-negative ints: tuples, a 2-d int64 array): head + each value in
    decimal joined by sep + tail (sep holds no bracket); with orjson, all rows at once."""
    if not len(rows) or not len(rows[0]) or orjson is None:
        return _python_ints(rows, sep, head, tail)
    return _orjson_ints(rows, sep, head, tail)
