"""Seeded random values for a tensor recorded in statistics mode (shape, dtype, Max, Min).

The seed comes from the API name, so a case draws the same data in run_ut, in any multi_run_ut worker
and after a resume. Floats are uniform in [Min, Max] with Min and Max themselves placed in the first
two elements; integers are uniform integers in [Min, Max]; bools are fair coin flips.
"""
import math
import zlib

import numpy as np

from msprobe.core.errors import UnsupportedError

__all__ = ["rng_for", "random_values", "kind_of_dtype"]

_INT_WORDS = ("int", "uint", "long", "short", "byte", "char")
MAX_GENERATED_ELEMENTS = 2 ** 30  # a dump.json claiming more is broken or hostile: never allocate it


def rng_for(name):
    """A numpy Generator seeded from `name` (e.g. 'Functional.linear.0.forward')."""
    return np.random.default_rng(zlib.crc32(name.encode("utf-8")))


def kind_of_dtype(dtype):
    """'float', 'int', 'bool' or 'complex' for a recorded dtype string ('torch.bfloat16', 'Int64')."""
    short = str(dtype).rsplit(".", 1)[-1].lower()
    if short.startswith("bool"):
        return "bool"
    if "complex" in short:
        return "complex"
    if short.startswith(_INT_WORDS) or short in ("long", "short", "byte", "char"):
        return "int"
    return "float"


def _finite_or(value, default):
    try:
        value = float(value)
    except (TypeError, ValueError):
        return default
    return value if math.isfinite(value) else default


def _shape_of(record):
    shape = record.get("shape") or ()
    if not isinstance(shape, (list, tuple)) or any(isinstance(s, bool) or not isinstance(s, int) or s < 0
                                                   for s in shape):
        raise UnsupportedError(f"recorded shape {str(shape)[:60]} is not a list of non-negative integers")
    size = math.prod(shape)
    if size > MAX_GENERATED_ELEMENTS:
        raise UnsupportedError(f"recorded shape {list(shape)} holds {size} elements, more than the "
                               f"{MAX_GENERATED_ELEMENTS} random data is generated for")
    return tuple(shape), size


def random_values(record, rng):
    """float64 / int64 / bool numpy array shaped like `record` ('shape', 'dtype', 'Max', 'Min')."""
    shape, size = _shape_of(record)
    kind = kind_of_dtype(record.get("dtype", "float32"))
    high, low = _finite_or(record.get("Max"), 1.0), _finite_or(record.get("Min"), -1.0)
    if kind == "int":  # keep integer bounds inside int64, whatever the statistics claim
        high, low = (min(max(v, -2.0 ** 62), 2.0 ** 62) for v in (high, low))
    if low > high:
        low, high = high, low
    if kind == "bool":
        values = rng.random(size) < 0.5 if low != high else np.full(size, bool(high))
    elif kind == "int":
        values = rng.integers(int(math.ceil(low)), int(math.floor(high)) + 1, size=size, dtype=np.int64) \
            if math.floor(high) >= math.ceil(low) else np.full(size, int(low), dtype=np.int64)
    else:
        values = rng.uniform(low, high, size) if high > low else np.full(size, low)
        if size >= 2 and high > low:
            values[0], values[1] = low, high
    return values.reshape(shape)
