"""Tensor-mode rows for awkward data: int/bool tensors, dtype mismatch, empty tensors, NaN/Inf, 0-d."""
import json
import os

import torch

from msprobe.core.compare import CompareOptions, compare_dumps


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
