"""Flattening dump.json into rows, corrupt inputs, and row matching (exact, fuzzy, mappings)."""
import json
import os

import pytest

from msprobe.core.io.load import MODE_MD5, MODE_STATISTICS, MODE_TENSOR, detect_mode, load_dump, load_stack
from msprobe.core.compare.mapping import NameMapper
from msprobe.core.compare.match import match_rows
from msprobe.core.errors import ParseError

from compare_samples import sample_dump


def test_rows_are_named_like_the_reference():
    table = load_dump(sample_dump("pytorch_tensor_mix_run_a"))
    names = table.columns["name"]
    assert names[:8] == ["Functional.linear.0.forward.input.0", "Functional.linear.0.forward.input.1",
                         "Functional.linear.0.forward.input.2", "Functional.linear.0.forward.output.0",
                         "Module.l1.Linear.forward.0.input.0", "Module.l1.Linear.forward.0.parameters.weight",
                         "Module.l1.Linear.forward.0.parameters.bias", "Module.l1.Linear.forward.0.output.0"]
    assert "Module.l1.Linear.parameters_grad.weight" in names
    assert "Functional.layer_norm.0.forward.input.1.0" in names  # nested list argument
    assert "Functional.gelu.0.forward.input.approximate" in names  # kwarg
    # the normalised record (normalise.py): 1.2.1's positional weight/bias/eps of layer_norm by name, and a null
    # slot for each backward gradient 1.2.1 left out (the file's 116 leaves, 118 rows)
    assert "Functional.layer_norm.0.forward.input.weight" in names and "Functional.layer_norm.0.forward.input.2" not in names
    assert "Tensor.pow.0.backward.output.1" in names and table.header["tool"] == "reference"
    assert len(names) == 118


def test_modes_are_detected():
    assert detect_mode(load_dump(sample_dump("pytorch_tensor_mix_run_a"))) == MODE_TENSOR
    assert detect_mode(load_dump(sample_dump("pytorch_md5_L1"))) == MODE_MD5
    assert detect_mode(load_dump(sample_dump("pytorch_statistics_mix"))) == MODE_STATISTICS


def test_truncated_json_names_the_file(tmp_path):
    path = tmp_path / "dump.json"
    with open(sample_dump("pytorch_statistics_mix")) as handle:
        path.write_text(handle.read()[:5000])
    with pytest.raises(ParseError, match=str(path)):
        load_dump(str(path))


def test_json_without_data_is_rejected(tmp_path):
    path = tmp_path / "dump.json"
    path.write_text(json.dumps({"task": "statistics"}))
    with pytest.raises(ParseError, match="no 'data'"):
        load_dump(str(path))


def test_stack_json_both_layouts(tmp_path):
    stack = load_stack(os.path.join(os.path.dirname(sample_dump("pytorch_tensor_mix_run_a")), "stack.json"))
    assert "Functional.linear.0.forward" in stack
    grouped = tmp_path / "stack.json"
    grouped.write_text(json.dumps({"0": [["Functional.relu.0.forward", "Module.a.A.forward.0"], ["File x, line 1"]]}))
    assert load_stack(str(grouped))["Module.a.A.forward.0"] == "['File x, line 1']"


def _table(tmp_path, name, entries):
    data = {}
    for entry, shape in entries:
        tensor = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": shape, "Max": 1.0, "Min": 0.0,
                  "Mean": 0.5, "Norm": 1.0, "requires_grad": False}
        data[entry] = {"input_args": [tensor], "input_kwargs": {}, "output": [tensor]}
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"task": "statistics", "level": "L1", "dump_data_dir": None, "data": data}))
    return load_dump(str(path))


def test_exact_match_reports_unmatched_on_both_sides(tmp_path):
    npu = _table(tmp_path, "npu", [("Functional.relu.0.forward", [2]), ("Torch.add.0.forward", [2])])
    bench = _table(tmp_path, "bench", [("Functional.relu.0.forward", [2]), ("Torch.sub.0.forward", [2])])
    index, unmatched = match_rows(npu, bench)
    assert index.tolist() == [0, 1, -1, -1]
    assert unmatched.tolist() == [2, 3]


def test_fuzzy_match_ignores_call_counters_and_skips_extra_calls(tmp_path):
    npu = _table(tmp_path, "npu", [("Functional.relu.5.forward", [2]), ("Functional.relu.6.forward", [3])])
    bench = _table(tmp_path, "bench", [("Functional.relu.0.forward", [7]), ("Functional.relu.1.forward", [2]),
                                       ("Functional.relu.2.forward", [3])])
    assert match_rows(npu, bench)[0].tolist() == [-1, -1, -1, -1]
    index, unmatched = match_rows(npu, bench, fuzzy=True)
    assert index.tolist() == [2, 3, 4, 5]
    assert unmatched.tolist() == [0, 1]


def test_data_mapping_pairs_named_rows(tmp_path):
    npu = _table(tmp_path, "npu", [("NPU.npu_fusion_attention.0.forward", [2])])
    bench = _table(tmp_path, "bench", [("Functional.scaled_dot_product_attention.0.forward", [2])])
    mapper = NameMapper(data_mapping={
        "NPU.npu_fusion_attention.0.forward.input.0": "Functional.scaled_dot_product_attention.0.forward.input.0"})
    assert match_rows(npu, bench, mapper=mapper)[0].tolist() == [0, -1]


def test_cell_layer_and_api_mappings_rename_entries():
    mapper = NameMapper(cell_mapping={"fc2.Dense": "fc2.Linear"})
    assert mapper.map_row("Cell.fc2.Dense.forward.0.input.0", "Cell.fc2.Dense.forward.0") == \
        "Module.fc2.Linear.forward.0.input.0"
    mapper = NameMapper(layer_mapping={"Attention": {"qkv_proj": "query_key_value"}})
    assert mapper.map_row("Module.layer.qkv_proj.Linear.forward.0.output.0", "Module.layer.qkv_proj.Linear.forward.0") \
        == "Module.layer.query_key_value.Linear.forward.0.output.0"
    mapper = NameMapper(api_mapping={"ms_api": "Functional.abs", "pt_api": "Torch.abs", "ms_args": [0, 1],
                                     "pt_args": [1, 0], "ms_outputs": [0], "pt_outputs": [0]})
    assert mapper.map_row("Functional.abs.0.forward.input.1", "Functional.abs.0.forward") == "Torch.abs.0.forward.input.0"
    mapper = NameMapper(entry_mapper=lambda e: e.replace("Mint.", "Torch."))
    assert mapper.map_row("Mint.add.0.forward.output.0", "Mint.add.0.forward") == "Torch.add.0.forward.output.0"


def test_files_orjson_refuses_read_as_the_json_module_reads_them(tmp_path):
    """NaN/Infinity literals and ints over 64 bits (written by the json module) still load."""
    tensor = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": float("nan"),
              "Min": float("-inf"), "Mean": float("inf"), "Norm": 2.0}
    data = {"Torch.add.0.forward": {"input_args": [tensor, {"type": "int", "value": 2 ** 70}],
                                          "output": [tensor]}}
    path = tmp_path / "dump.json"
    path.write_text(json.dumps({"task": "statistics", "level": "L1", "data": data}))
    assert "NaN" in path.read_text() and str(2 ** 70) in path.read_text()
    columns = load_dump(str(path)).columns
    assert columns["name"] == ["Torch.add.0.forward.input.0", "Torch.add.0.forward.input.1",
                               "Torch.add.0.forward.output.0"]
    assert str(columns["max"][0]) == "nan" and columns["min"][0] == float("-inf") and columns["mean"][2] == float("inf")
    assert columns["value"][1] == 2 ** 70 and columns["kind"][1] == "scalar"


def test_a_string_that_is_not_utf8_names_the_file(tmp_path):
    path = tmp_path / "dump.json"
    path.write_bytes(b'{"task": "statistics", "data": {"\xff": {}}}')
    with pytest.raises(ParseError, match="not UTF-8"):
        load_dump(str(path))


def test_stack_texts_are_the_str_of_each_entrys_lines(tmp_path):
    lines = ["File model.py, line 3, in forward, \n return self.fc(x)", "File train.py, line 9, in <module>"]
    raw = {"Functional.linear.0.forward": lines, "Functional.linear.1.forward": list(lines),
           "Functional.relu.0.forward": lines[:1], "Torch.odd.0.forward": [1, "a"], "Torch.odd.1.forward": [1.0, "a"]}
    path = tmp_path / "stack.json"
    path.write_text(json.dumps(raw))
    assert load_stack(str(path)) == {name: str(value) for name, value in raw.items()}
