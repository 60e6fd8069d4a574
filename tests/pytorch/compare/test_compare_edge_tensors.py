"""Rows for awkward data: int/bool tensors, dtype and shape mismatch, empty tensors, NaN/Inf, 0-d, bf16.

The first test writes a dump.json by hand (one .pt per case); the others compare real dumps of the
same calls made under PrecisionDebugger, in tensor and statistics mode.
"""
import json
import os

import pytest
import torch

from compare_models import awkward_calls, dump_calls
from msprobe.core.compare import CompareOptions, compare_dumps
from msprobe.core.compare.judge import RED, RED_MESSAGES


def _write_dump(root, tensors):
    """A tensor-mode dump.json (reference layout) holding one API whose inputs are `tensors`."""
    data_dir = os.path.join(root, "dump_tensor_data")
    os.makedirs(data_dir)
    args = []
    for index, tensor in enumerate(tensors):
        name = f"Torch.custom.0.forward.input.{index}.pt"
        torch.save(tensor, os.path.join(data_dir, name))
        floats = tensor.float() if tensor.numel() else torch.zeros(1)
        args.append({"type": "torch.Tensor", "dtype": str(tensor.dtype), "shape": list(tensor.shape),
                     "Max": floats.max().item(), "Min": floats.min().item(), "Mean": floats.mean().item(),
                     "Norm": floats.norm().item(), "requires_grad": False, "data_name": name})
    dump = {"task": "tensor", "level": "L1", "framework": "pytorch", "dump_data_dir": data_dir,
            "data": {"Torch.custom.0.forward": {"input_args": args, "input_kwargs": {}, "output": []}}}
    with open(os.path.join(root, "dump.json"), "w") as handle:
        json.dump(dump, handle)
    return os.path.join(root, "dump.json")


def test_awkward_tensors_become_rows_with_messages(tmp_path):
    npu = [torch.tensor([1, 2, 3]), torch.tensor([True, False]), torch.tensor([1, 2], dtype=torch.int32),
           torch.zeros(0, 4), torch.tensor([float("nan"), 1.0]), torch.tensor([float("inf"), 1.0]),
           torch.tensor(2.0), torch.randn(4, 4, dtype=torch.bfloat16)]
    bench = [torch.tensor([1, 2, 4]), torch.tensor([True, True]), torch.tensor([1, 2], dtype=torch.int64),
             torch.zeros(0, 4), torch.tensor([1.0, float("nan")]), torch.tensor([float("inf"), 1.0]),
             torch.tensor(1.5), npu[7].float()]
    result = compare_dumps(_write_dump(str(tmp_path / "npu"), npu), _write_dump(str(tmp_path / "bench"), bench),
                           str(tmp_path / "out"), CompareOptions(progress=False))[0].result
    cells = dict(zip(result.header, zip(*result.rows())))
    max_abs, verdicts, messages = cells["MaxAbsErr"], cells["Accuracy Reached or Not"], cells["Err_message"]
    assert max_abs[0] == 1.0 and verdicts[0] == "Yes"  # int64 compared as numbers: cosine 0.9915, abs 1
    assert max_abs[1] == 1.0                                                  # bool
    assert "Dtype of NPU and bench Tensor do not match." in messages[2] and max_abs[2] == 0.0
    assert messages[3] == "This is empty data, can not compare." and verdicts[3] == "None"
    assert "The Position of inf or nan" in messages[4] and verdicts[4] == "No"
    assert cells["Cosine"][5] == 1.0 and verdicts[5] == "Yes"                 # inf at the same place
    assert cells["Cosine"][6] == "unsupported" and max_abs[6] == 0.5
    assert cells["Cosine"][7] == 1.0 and messages[7] is None                  # bf16 vs its fp32 copy
    assert "The maximum or minimum of the NPU data is nan, inf or -inf" in messages[4]


@pytest.fixture(scope="module")
def awkward(tmp_path_factory):
    """task -> CompareResult of the awkward calls, NPU side against bench side (real dumps)."""
    root = tmp_path_factory.mktemp("awkward")
    results = {}
    for task in ("statistics", "tensor"):
        npu = dump_calls(str(root / f"{task}_npu"), awkward_calls("npu"), task)
        bench = dump_calls(str(root / f"{task}_bench"), awkward_calls("bench"), task)
        results[task] = compare_dumps(os.path.join(npu, "dump.json"), os.path.join(bench, "dump.json"),
                                      str(root / f"out_{task}"), CompareOptions(progress=False))[0].result
    return results


def _cells(result, row_name):
    """{column: cell} of one row, plus its colour under the key 'color'."""
    row = result.columns["NPU Name"].index(row_name)
    cells = {column: result.columns[column][row] for column in result.header}
    cells["color"] = int(result.color[row])
    return cells


@pytest.mark.parametrize("task", ["statistics", "tensor"])
def test_every_awkward_call_is_a_matched_row(awkward, task):
    result = awkward[task]
    assert result.columns["NPU Name"] == result.columns["Bench Name"]
    assert len(result) == 19  # 9 calls of one input and one output, and the scalar argument of add


@pytest.mark.parametrize("task", ["statistics", "tensor"])
def test_empty_tensor_statistics_are_not_taken_for_nan(awkward, task):
    cells = _cells(awkward[task], "Torch.relu.0.forward.input.0")
    assert cells["color"] == 0
    assert all(cells[column] == "N/A" for column in ("NPU max", "NPU min", "Bench mean", "Bench l2norm"))
    if task == "tensor":
        assert cells["Err_message"] == "This is empty data, can not compare." and cells["Cosine"] == "None"
    else:
        assert cells["Max diff"] == "N/A" and cells["MaxRelativeErr"] == "N/A" and cells["Err_message"] is None


@pytest.mark.parametrize("task", ["statistics", "tensor"])
def test_bool_tensor_without_mean_keeps_max_and_min(awkward, task):
    cells = _cells(awkward[task], "Torch.logical_not.0.forward.input.0")
    assert (cells["NPU min"], cells["Bench min"], cells["NPU mean"]) == (0.0, 1.0, "N/A")
    if task == "statistics":
        assert cells["Min diff"] == -1.0 and cells["Mean diff"] == "N/A" and cells["Result"] == "Warning"
    else:
        assert cells["MaxAbsErr"] == 1.0 and cells["Accuracy Reached or Not"] == "No"


@pytest.mark.parametrize("task", ["statistics", "tensor"])
def test_dtype_and_shape_mismatches_are_explained(awkward, task):
    dtype = _cells(awkward[task], "Torch.neg.0.forward.input.0")
    assert (dtype["NPU Dtype"], dtype["Bench Dtype"]) == ("torch.int32", "torch.int64")
    assert dtype["Err_message"] == "Dtype of NPU and bench Tensor do not match."
    shape = _cells(awkward[task], "Torch.sigmoid.0.forward.output.0")
    assert (shape["NPU Tensor Shape"], shape["Bench Tensor Shape"]) == ("[2, 3]", "[3, 2]")
    if task == "tensor":
        assert shape["Err_message"] == "Shape of NPU and bench Tensor do not match. Skipped."
        assert shape["Accuracy Reached or Not"] == "Unmatched" and shape["Cosine"] == "shape unmatched"
    else:
        assert shape["Err_message"] == "Shape of NPU and bench Tensor do not match."


def test_tensor_mode_nan_inf_int_and_zero_dim_rows(awkward):
    result = awkward["tensor"]
    nan = _cells(result, "Torch.abs.0.forward.input.0")
    assert nan["Cosine"] == "N/A" and nan["Accuracy Reached or Not"] == "No" and nan["color"] == RED
    assert nan["Err_message"].split("\n") == ["The Position of inf or nan in NPU and bench Tensor do not match.",
                                              RED_MESSAGES["nan_inf"]]
    inf = _cells(result, "Torch.abs.1.forward.output.0")  # inf at the same place on both sides
    assert (inf["Cosine"], inf["MaxAbsErr"], inf["Accuracy Reached or Not"]) == (1.0, 0.0, "Yes")
    assert inf["NPU max"] == "inf" and inf["color"] == RED
    ints = _cells(result, "Torch.add.0.forward.input.0")  # [1, 2, 3] against [1, 2, 4]
    assert ints["MaxAbsErr"] == 1.0 and ints["MaxRelativeErr"] == 0.25
    assert ints["Cosine"] == pytest.approx(17 / (14 * 21) ** 0.5, abs=1e-9)
    assert _cells(result, "Torch.add.0.forward.input.1")["Cosine"] == "unsupported"  # the scalar 1
    zero_dim = _cells(result, "Torch.exp.0.forward.input.0")
    assert zero_dim["Cosine"] == "unsupported" and zero_dim["MaxAbsErr"] == 0.5
    assert zero_dim["Err_message"].startswith("This is type of 0-d tensor")
    bf16 = _cells(result, "Torch.tanh.0.forward.input.0")
    assert (bf16["NPU Dtype"], bf16["Bench Dtype"]) == ("torch.bfloat16", "torch.float32")
    assert bf16["Cosine"] > 0.9999 and bf16["MaxAbsErr"] < 0.01 and bf16["Accuracy Reached or Not"] == "Yes"


def test_statistics_mode_nan_and_scalar_rows(awkward):
    result = awkward["statistics"]
    nan = _cells(result, "Torch.abs.0.forward.input.0")
    assert nan["color"] == RED and nan["Err_message"] == RED_MESSAGES["nan_inf"] and nan["NPU max"] == "nan"
    scalar = _cells(result, "Torch.exp.0.forward.output.0")  # exp(2) against exp(1.5)
    assert scalar["Max diff"] == pytest.approx(7.389056 - 4.481689, abs=1e-5)
    assert scalar["MaxRelativeErr"] == "64.872133%" and scalar["Result"] == "Warning"
