"""Reason codes: why a compared row holds what it holds (numbers, or why there are none).

Metrics and matching set one code per row; the judge and the advisor decide on codes and numbers;
only `render` turns a code into report text. Codes are small ints so a column of them is an int8 array.
"""
from enum import IntEnum

import numpy as np

__all__ = ["Reason", "NOT_COMPARED", "UNREADABLE", "reason_in"]


class Reason(IntEnum):
    OK = 0                  # both sides compared, metrics are numbers
    NO_BENCH = 1            # the NPU row has no bench row
    NO_NPU = 2              # a bench row no NPU row took
    NPU_FILE_MISSING = 3    # tensor mode: the NPU tensor file does not exist (or the row names none)
    BENCH_FILE_MISSING = 4  # tensor mode: the bench tensor file does not exist
    NPU_UNREADABLE = 5      # tensor mode: the NPU file exists but is truncated, not a tensor, or refused
    BENCH_UNREADABLE = 6    # same for the bench file
    FILE_SHAPE = 7          # a tensor file disagrees with the shape its dump.json records
    SHAPE_MISMATCH = 8      # the two tensors have different shapes
    EMPTY = 9               # empty tensor
    ZERO_DIM = 10           # 0-d tensor: no cosine, no error ratios
    NAN_POSITION = 11       # NaN/Inf at different places on the two sides
    NON_TENSOR = 12         # non-tensor argument, equal on both sides
    VALUE_DIFF = 13         # non-tensor argument whose values differ
    BENCH_NONE = 14         # the NPU side holds data where the bench side holds None
    CROSS_TOOL = 15         # the two tools record different quantities under this name (normalise.py)


NOT_COMPARED = frozenset({Reason.NO_BENCH, Reason.NO_NPU, Reason.NPU_FILE_MISSING, Reason.BENCH_FILE_MISSING,
                          Reason.NPU_UNREADABLE, Reason.BENCH_UNREADABLE, Reason.FILE_SHAPE, Reason.BENCH_NONE,
                          Reason.CROSS_TOOL})
UNREADABLE = frozenset({Reason.NPU_UNREADABLE, Reason.BENCH_UNREADABLE, Reason.FILE_SHAPE})


_TABLES: dict = {}  # frozenset of codes -> bool per code


def reason_in(reason, codes):
    """Bool per row: its code (an int array of Reason codes) is one of `codes`: np.isin by a table of the
    few codes (one indexing, not isin's per-call setup); other arrays through np.isin itself."""
    reason = np.asarray(reason)
    if reason.dtype.kind not in "iu" or (reason.size and (reason.min() < 0 or reason.max() >= len(Reason))):
        return np.isin(reason, [int(code) for code in codes])
    key = frozenset(int(code) for code in codes)
    table = _TABLES.get(key)
    if table is None:
        table = _TABLES[key] = np.zeros(len(Reason), dtype=bool)
        table[[code for code in key if 0 <= code < len(Reason)]] = True
    return table[reason]
