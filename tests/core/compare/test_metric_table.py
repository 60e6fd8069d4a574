"""Tensor-mode metrics are one table: the report's columns, markers, the 0-d message and the numbers all come
from TENSOR_METRIC_TABLE, so they cannot fall out of step (a wrong order used to shift columns silently)."""
import math
import pickle

import numpy as np
import pytest

from msprobe.core.io.load import MODE_TENSOR
from msprobe.core.compare.metrics import (EXTENSION_METRICS, MSG_ZERO_DIM, REFERENCE_METRICS, TENSOR_METRIC_TABLE,
                                          TensorMetrics, not_compared, tensor_metrics)
from msprobe.core.compare.reasons import Reason
from msprobe.core.compare.render import headers_for, tensor_metric_cells

# 1.2.1's tensor-mode columns (10.accuracy_compare_PyTorch.md), in its order
REFERENCE_TENSOR_HEADER = [
    "NPU Name", "Bench Name", "NPU Dtype", "Bench Dtype", "NPU Tensor Shape", "Bench Tensor Shape", "Cosine",
    "MaxAbsErr", "MaxRelativeErr", "One Thousandth Err Ratio", "Five Thousandths Err Ratio", "NPU max", "NPU min",
    "NPU mean", "NPU l2norm", "Bench max", "Bench min", "Bench mean", "Bench l2norm", "Accuracy Reached or Not",
    "Err_message", "Data_name"]


def test_reference_metrics_keep_the_1_2_1_layout_and_added_ones_follow_it():
    header = headers_for(MODE_TENSOR, with_stack=False)
    added = [m.header for m in EXTENSION_METRICS]
    assert header == REFERENCE_TENSOR_HEADER + added + ["Suspicion"]
    assert [m.header for m in REFERENCE_METRICS] == header[6:11]


def test_zero_dim_message_names_the_reference_metrics_a_0d_tensor_lacks():
    assert MSG_ZERO_DIM == ("This is type of 0-d tensor, can not calculate 'Cosine', 'One Thousandth Err Ratio' and "
                            "'Five Thousandths Err Ratio'. ")


def test_each_value_lands_under_its_own_header():
    npu = np.array([1.0, 2.0, 4.0], dtype=np.float64)
    bench = np.array([1.0, 2.0, 5.0], dtype=np.float64)
    result = tensor_metrics(npu, bench)
    by_field = dict(zip((m.field for m in TENSOR_METRIC_TABLE), result.values))
    cosine = (1 + 4 + 20) / math.sqrt(21 * 30)
    assert by_field["cosine"] == pytest.approx(cosine, abs=1e-12)
    assert (by_field["max_abs"], by_field["max_rel"]) == (1.0, 0.2)
    assert by_field["one_thousandth"] == by_field["five_thousandths"] == pytest.approx(2 / 3)
    for metric in TENSOR_METRIC_TABLE:
        assert getattr(result, metric.field) == by_field[metric.field]


@pytest.mark.parametrize("reason, marker", [(Reason.NAN_POSITION, "N/A"), (Reason.NO_BENCH, "N/A"),
                                            (Reason.SHAPE_MISMATCH, "shape unmatched"),
                                            (Reason.VALUE_DIFF, "unsupported"), (Reason.EMPTY, "None"),
                                            (Reason.NPU_UNREADABLE, "None")])
def test_a_reason_marks_every_metric_cell(reason, marker):
    assert tensor_metric_cells(not_compared(reason).values, reason) == [marker] * len(TENSOR_METRIC_TABLE)


def test_a_0d_tensor_keeps_the_metrics_it_has_and_marks_the_others():
    result = tensor_metrics(np.array(2.0), np.array(1.5))
    cells = tensor_metric_cells(result.values, result.reason)
    for metric, cell in zip(TENSOR_METRIC_TABLE, cells):
        assert (cell == "unsupported") == (not metric.zero_dim), metric.field
    assert cells[[m.field for m in TENSOR_METRIC_TABLE].index("max_abs")] == 0.5


def test_metrics_cross_process_boundaries_intact():
    result = tensor_metrics(np.array([1.0, -1.0]), np.array([1.0, -0.5]))
    copy = pickle.loads(pickle.dumps(result))
    assert isinstance(copy, TensorMetrics) and copy == result
    assert (copy.reason, copy.detail, copy.error_norm) == (Reason.OK, "", 0.5)
    assert copy.bench_norm == pytest.approx(math.sqrt(1.25))
