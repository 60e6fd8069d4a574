"""reason_in (a table of the few Reason codes) tells what np.isin tells, for every code set the compare asks."""
import numpy as np
import pytest

from msprobe.core.compare.reasons import NOT_COMPARED, UNREADABLE, Reason, reason_in


@pytest.mark.parametrize("codes", [NOT_COMPARED, UNREADABLE, (Reason.NAN_POSITION, Reason.NON_TENSOR),
                                   (int(Reason.VALUE_DIFF),), (), (99, Reason.OK)])
def test_reason_in_equals_isin(codes):
    rng = np.random.default_rng(1)
    for reason in (rng.integers(0, len(Reason), 3000).astype(np.int8), np.zeros(0, dtype=np.int8),
                   rng.integers(0, len(Reason), 50), np.array([0, 120, 3], dtype=np.int64),
                   np.array([-1, 2, 5], dtype=np.int8), np.array([1.0, 5.0, 7.5])):
        expected = np.isin(reason, [int(code) for code in codes])
        made = reason_in(reason, codes)
        assert made.dtype == bool and np.array_equal(made, expected)
