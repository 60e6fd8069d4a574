"""Accuracy verdicts and highlight rules, table-driven."""
import numpy as np
import pytest

from msprobe.core.compare import judge
from msprobe.core.compare.reasons import Reason

NAN = float("nan")


@pytest.mark.parametrize("cosine, max_abs, reason, expected", [
    (1.0, 0.0, Reason.OK, "Yes"),
    (0.995, 0.0009, Reason.OK, "Yes"),
    (0.98, 0.002, Reason.OK, "No"),      # cosine < 0.99 and abs > 0.001
    (0.98, 0.0005, Reason.OK, "Yes"),
    (0.85, 0.0, Reason.OK, "No"),        # cosine < 0.9
    (0.999, 1.5, Reason.OK, "No"),       # abs > 1
    (NAN, NAN, Reason.NAN_POSITION, "No"),  # nan/inf positions differ
    (NAN, 0.1, Reason.OK, "No"),         # one side all zeros: cosine NaN
    (NAN, 0.04, Reason.ZERO_DIM, "None"),
    (NAN, 1.5, Reason.ZERO_DIM, "No"),
    (NAN, NAN, Reason.NON_TENSOR, "None"),
    (NAN, NAN, Reason.EMPTY, "None"),
    (NAN, NAN, Reason.NPU_UNREADABLE, "None"),
    (NAN, NAN, Reason.SHAPE_MISMATCH, "Unmatched"),
])
def test_accuracy_verdicts(cosine, max_abs, reason, expected):
    assert judge.accuracy_verdicts([cosine], [max_abs], [int(reason)])[0] == expected


def _rows(roles):
    return np.zeros(len(roles), dtype=np.int64), np.array(roles, dtype=object)


def test_red_when_inputs_agree_and_output_does_not():
    ids, roles = _rows(["input", "parameters", "output"])
    color, reasons = judge.highlight(ids, roles, np.zeros(3, bool), np.array([0.0, 0.0, 0.5]), np.zeros(3),
                                     cosine=np.array([1.0, 1.0, 0.5]), thousandth=np.array([1.0, 0.95, 0.2]))
    assert color.tolist() == [0, 0, judge.RED]
    assert reasons[2] == [("red", "thousandth")]  # red rows carry only red reasons


def test_yellow_cosine_drop():
    ids, roles = _rows(["input", "output"])
    color, reasons = judge.highlight(ids, roles, np.zeros(2, bool), np.array([0.1, 0.1]), np.zeros(2),
                                     cosine=np.array([0.9, 0.75]), thousandth=np.array([0.3, 0.3]))
    assert color.tolist() == [0, judge.YELLOW]
    assert reasons[1] == [("yellow", "cosine")]


def test_yellow_abs_error_growth_and_relative_rules():
    ids, roles = _rows(["input", "output"])
    color, reasons = judge.highlight(ids, roles, np.zeros(2, bool), np.array([2.0, 30.0]), np.array([0.005, 0.2]))
    assert color.tolist() == [0, judge.YELLOW]
    assert set(reasons[1]) == {("yellow", "abs_growth"), ("yellow", "relative")}


def test_statistics_red_on_output_relative_and_nan():
    ids = np.array([0, 0, 1])
    roles = np.array(["input", "output", "output"], dtype=object)
    nonfinite = np.array([True, False, False])
    color, reasons = judge.highlight(ids, roles, nonfinite, np.array([0.0, 0.0, 2e10]), np.array([0.0, 0.6, 0.0]))
    assert color.tolist() == [judge.RED, judge.RED, judge.RED]
    assert reasons[0] == [("red", "nan_inf")]
    assert reasons[1] == [("red", "relative")]
    assert reasons[2] == [("red", "huge_abs")]


def test_rules_do_not_cross_entries():
    ids = np.array([0, 1])
    roles = np.array(["input", "output"], dtype=object)
    color, _ = judge.highlight(ids, roles, np.zeros(2, bool), np.zeros(2), np.zeros(2),
                               cosine=np.array([1.0, 0.5]), thousandth=np.array([1.0, 0.0]))
    assert color.tolist() == [0, 0]


def test_statistics_results():
    relative = np.array([[0.1, 0.2, 0.6, 0.0], [0.1, 0.1, 0.1, 0.1], [np.nan] * 4])
    result = judge.statistics_results(relative, np.array([True, True, False]))
    assert result.tolist() == ["Warning", "", "N/A"]


def test_yellow_relative_rule_needs_one_agreeing_tensor_input():
    ids, roles = _rows(["input", "input", "output"])
    relative = np.array([0.005, 0.05, 0.2])  # the first input agrees, the second does not
    color, reasons = judge.highlight(ids, roles, np.zeros(3, bool), np.zeros(3), relative)
    assert color.tolist() == [0, 0, judge.YELLOW]
    assert reasons[2] == [("yellow", "relative")]
    # an equal scalar argument (alpha=1) is no evidence that the inputs agree
    is_tensor = np.array([False, True, True])
    color, _ = judge.highlight(ids, roles, np.zeros(3, bool), np.zeros(3), np.array([0.0, 0.05, 0.2]),
                               is_tensor=is_tensor)
    assert color.tolist() == [0, 0, 0]


def test_gate_drops_relative_rules_on_rows_within_tolerance_but_keeps_nan_and_huge_errors():
    color = np.array([judge.RED, judge.RED, judge.YELLOW, judge.RED], dtype=np.int8)
    reasons = [[("red", "relative")], [("red", "nan_inf")], [("yellow", "relative")], [("red", "relative")]]
    within = np.array([True, True, True, False])
    gated, kept, overruled = judge.gate_highlights(color, reasons, within)
    assert gated.tolist() == [0, judge.RED, 0, judge.RED]
    assert kept == [[], [("red", "nan_inf")], [], [("red", "relative")]]
    assert overruled == [[("red", "relative")], [], [("yellow", "relative")], []]


def test_a_few_fp16_tensors_do_not_make_an_fp32_run_fp16():
    from msprobe.core.compare.tolerance import run_epsilon

    leak = ["torch.float32"] * 998 + ["torch.float16"] * 2 + ["torch.int64"] * 50
    assert run_epsilon(leak) == 2.0 ** -23
    autocast = ["torch.float32"] * 77 + ["torch.float16"] * 23
    assert run_epsilon(autocast) == 2.0 ** -10
    bf16_port = ["torch.bfloat16"] * 87 + ["torch.float32"] * 13
    assert run_epsilon(bf16_port) == 2.0 ** -7
    assert run_epsilon(["torch.int64", "torch.bool"]) == 0.0
