"""parse building blocks on hand-computed values: safe tensor reading, element compare, dump lookup."""
import json
import os
import pickle

import numpy as np
import pytest
import torch

from msprobe.core.errors import MsprobeError, ParseError
from msprobe.core.parse.dump_lookup import lookup_api, render_lookup
from msprobe.core.parse.tensor_compare import compare_tensors
from msprobe.core.parse.tensor_file import TensorFile, read_tensor_file


def _tensor(values, dtype="float32"):
    return TensorFile("mem", np.asarray(values), dtype)


def test_error_ratio_follows_isclose_with_golden_on_the_right():
    golden = np.array([1.0, 2.0, 0.0, -4.0])
    mine = np.array([1.0005, 2.01, 0.0009, -4.0])
    result = compare_tensors(_tensor(mine), _tensor(golden), rows=2, atol=0.001, rtol=0.001)
    # |diff| > 0.001 + 0.001 * |golden|: 0.0005 <= 0.002 ok, 0.01 > 0.003 error, 0.0009 <= 0.001 ok
    assert result.error_ratio == 0.25 and not result.all_close
    assert result.error_rows == [(1, 2.01, 2.0, pytest.approx(0.01))]
    assert [row[0] for row in result.top_rows] == [0, 1]
    expected_cos = mine @ golden / np.linalg.norm(mine) / np.linalg.norm(golden)
    assert result.cosine == pytest.approx(expected_cos)


def test_scaled_tensor_is_all_errors_and_a_tiny_shift_none():
    base = np.linspace(0.5, 2.0, 50)
    assert compare_tensors(_tensor(base * 8), _tensor(base)).error_ratio == 1.0
    shifted = compare_tensors(_tensor(base + 1e-4), _tensor(base))
    assert shifted.error_ratio == 0.0 and shifted.all_close


def test_different_shapes_are_flattened_and_zero_padded():
    result = compare_tensors(_tensor(np.ones((2, 2))), _tensor(np.ones(3)))
    assert result.shapes_differ and result.count == 4
    assert result.error_rows == [(3, 1.0, 0.0, 1.0)]


def test_npy_and_pt_files_keep_their_dtype(tmp_path):
    np.save(tmp_path / "half.npy", np.array([1.5, -2.0], dtype=np.float16))
    torch.save(torch.tensor([1.5, 3.0], dtype=torch.bfloat16), tmp_path / "bf16.pt")
    half = read_tensor_file(str(tmp_path / "half.npy"))
    assert half.dtype == "float16" and half.array.tolist() == [1.5, -2.0]
    bf16 = read_tensor_file(str(tmp_path / "bf16.pt"))
    assert bf16.dtype == "bfloat16" and bf16.array.tolist() == [1.5, 3.0]


class _Payload:
    def __reduce__(self):
        return os.system, ("touch " + _Payload.marker,)


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
def test_files_that_would_run_code_are_refused_not_run(tmp_path):
    marker = tmp_path / "was_run"
    _Payload.marker = str(marker)
    np.save(tmp_path / "objects.npy", np.array([_Payload()], dtype=object), allow_pickle=True)
    with pytest.raises(ParseError, match="safely"):
        read_tensor_file(str(tmp_path / "objects.npy"))
    with open(tmp_path / "evil.pt", "wb") as handle:
        pickle.dump(_Payload(), handle)
    with pytest.raises(ParseError):
        read_tensor_file(str(tmp_path / "evil.pt"))
    torch.save({"a": torch.ones(2)}, tmp_path / "dict.pt")
    with pytest.raises(ParseError, match="not a tensor"):
        read_tensor_file(str(tmp_path / "dict.pt"))
    assert not marker.exists()
    with pytest.raises(MsprobeError, match="not a .npy or .pt"):
        read_tensor_file(__file__)


def test_old_pkl_format_and_1_2_1_stack_json(tmp_path):
    pkl = tmp_path / "api_stack_dump.pkl"
    lines = [["Functional_conv2d_0_forward_input.0", 1, [], "torch.float32", [2, 1], [1.5, -0.9, 0.49]],
             ["Functional_conv2d_0_forward_output", 1, [], "torch.float32", [2, 2], [0.02, -1.7, -0.67]],
             ["Functional_conv2d_0_forward_stack_info", [["a.py", 3, "f", "y = conv(x)"]]],
             ["Functional_relu_0_forward_output", 1, [], "torch.float32", [2], [1.0, 0.0, 0.5]]]
    pkl.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    found = lookup_api(str(pkl), "Functional_conv2d_0_forward")
    text = render_lookup(found, "Functional_conv2d_0_forward")
    assert "[Functional_conv2d_0_forward_output][dtype: torch.float32][shape: [2, 2]][max: 0.02]" in text
    assert "File a.py, line 3, in f" in text and "y = conv(x)" in text and "relu" not in text
    # 1.2.1's later stack.json groups names: {"0": [[names], [frames]]}
    (tmp_path / "dump.json").write_text(json.dumps({"task": "statistics", "data": {"Functional.gelu.0.forward": {
        "input_args": [{"type": "torch.Tensor", "dtype": "torch.float16", "shape": [3], "Max": 2.0, "Min": -1.0,
                        "Mean": 0.5, "Norm": 2.4}], "input_kwargs": {}, "output": []}}}))
    (tmp_path / "stack.json").write_text(json.dumps({"0": [["Functional.gelu.0.forward"], ["File b.py, line 7"]]}))
    text = render_lookup(lookup_api(str(tmp_path / "dump.json"), "Functional_gelu_0_forward"), "x")
    assert "[Functional.gelu.0.forward.input.0][dtype: torch.float16][shape: [3]][max: 2.0][min: -1.0][mean: 0.5]" in text
    assert "File b.py, line 7" in text
    assert render_lookup(lookup_api(str(tmp_path / "dump.json"), "Functional.conv2d.0"), "Functional.conv2d.0") \
        == "No API named 'Functional.conv2d.0' in this dump."
