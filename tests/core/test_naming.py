"""Parsing and building dump entry names."""
import pytest

from msprobe.core.errors import ConfigError
from msprobe.core.naming import (EntryName, api_name, check_api_name, is_api_name, is_inplace, is_random_api,
                                 is_tensor_descriptor, module_name, params_grad_name, parse_call_name, parse_name,
                                 parse_row_name, parse_tensor_file_name, strip_call_index, tensor_file_name)


@pytest.mark.parametrize("name, prefix, api, index, direction, is_module", [
    ("Functional.linear.0.forward", "Functional", "linear", "0", "forward", False),
    ("Tensor.__add__.12.backward", "Tensor", "__add__", "12", "backward", False),
    ("Module.l1.Linear.forward.0", "Module", "l1.Linear", "0", "forward", True),
    ("Module.blocks.0.attn.MultiheadAttention.backward.3", "Module", "blocks.0.attn.MultiheadAttention", "3", "backward", True),
    ("Cell.block.fc.Dense.forward.0", "Cell", "block.fc.Dense", "0", "forward", True),
    ("Module.l1.Linear.parameters_grad", "Module", "l1.Linear", "", "parameters_grad", True),
    ("Aten.addmm.default.4.forward", "Aten", "addmm.default", "4", "forward", False),
    ("Mint.add.0.forward", "Mint", "add", "0", "forward", False),
])
def test_parse_name(name, prefix, api, index, direction, is_module):
    parsed = parse_name(name)
    assert (parsed.prefix, parsed.api, parsed.index, parsed.direction, parsed.is_module) == \
        (prefix, api, index, direction, is_module)


def test_unparseable_names_return_none_and_strip_keeps_them():
    assert parse_name("garbage") is None
    assert strip_call_index("garbage") == "garbage"
    assert strip_call_index("Functional.linear.7.forward") == "Functional.linear.forward"


def test_builders_round_trip():
    assert parse_name(api_name("Torch", "matmul", 3, "forward")).api == "matmul"
    assert module_name("Module", "l1", "Linear", "backward", 2) == "Module.l1.Linear.backward.2"
    assert params_grad_name("Cell", "fc", "Dense") == "Cell.fc.Dense.parameters_grad"


# -- the one schema: EntryName, rows, tensor files, rules -------------------------------------------


@pytest.mark.parametrize("name", [
    "Functional.linear.0.forward", "Tensor.__mul__.0.forward", "Module.l1.Linear.forward.0",
    "Cell.block.fc.Dense.backward.2", "Module.l1.Linear.parameters_grad", "Aten.addmm.default.4.backward",
])
def test_entry_name_round_trips_through_str(name):
    assert str(EntryName.parse(name)) == name


def test_entry_name_parts_and_derived_names():
    entry = EntryName.parse("Torch.linalg.vector_norm.3.forward")
    assert (entry.prefix, entry.api, entry.index, entry.short_api) == ("Torch", "linalg.vector_norm", "3", "vector_norm")
    assert entry.call_name == "Torch.linalg.vector_norm.3"
    assert str(entry.with_direction("backward")) == "Torch.linalg.vector_norm.3.backward"
    assert EntryName.parse("Module.l1.Linear.forward.0").call_name == "Module.l1.Linear.0"


def test_trailing_newline_is_not_a_name():
    # `$` would accept a trailing newline; names that reach file names must not
    assert EntryName.parse("Functional.linear.0.forward\n") is None
    assert parse_row_name("Functional.linear.0.forward.output.0\n")[0] is None


@pytest.mark.parametrize("row, entry, tail", [
    ("Functional.linear.0.forward.output.1", "Functional.linear.0.forward", "output.1"),
    ("Aten.addmm.default.4.backward.input.0", "Aten.addmm.default.4.backward", "input.0"),
    ("Module.blocks.0.attn.MHA.forward.3.input.0", "Module.blocks.0.attn.MHA.forward.3", "input.0"),
    ("Module.l1.Linear.parameters_grad.weight", "Module.l1.Linear.parameters_grad", "weight"),
    ("Tensor.add_.3.forward", "Tensor.add_.3.forward", ""),
])
def test_row_names_split_into_entry_and_tail(row, entry, tail):
    parsed, rest = parse_row_name(row)
    assert (str(parsed), rest) == (entry, tail)


def test_call_names_and_tensor_file_names():
    assert parse_call_name("Functional.linear.0") == ("Functional", "linear", "0")
    assert parse_call_name("Tensor.__add__.12.backward.output.0") == ("Tensor", "__add__", "12")
    assert parse_call_name("garbage") is None
    file_name = tensor_file_name("Functional.linear.0.forward", "input", 0, "x", suffix=".npy")
    assert file_name == "Functional.linear.0.forward.input.0.x.npy"
    entry, tail, suffix = parse_tensor_file_name(file_name)
    assert (str(entry), tail, suffix) == ("Functional.linear.0.forward", "input.0.x", ".npy")
    assert parse_tensor_file_name("notes.txt") == (None, "", "")


@pytest.mark.parametrize("name", ["Functional.softmax.0", "Tensor.__mul__.2.forward", "Aten.addmm.default.4",
                                  "Torch.linalg.vector_norm.0.backward"])
def test_api_name_grammar_accepts_real_names(name):
    assert is_api_name(name)
    assert check_api_name(name).call_name == name.replace(".forward", "").replace(".backward", "")


@pytest.mark.parametrize("name", [
    "Functional.softmax.0\n", "Functional.a/b.0", "Functional.x\nimport os.0", "Functional.x(1).0",
    "Functional.x'.0", "Functional..0", "Functional.softmax", "../evil.x.0", "Functional.0x.0",
    "Functional.sóftmax.0", "F." + "a" * 300 + ".0", 3, None,
])
def test_api_name_grammar_rejects_everything_else_in_one_line(name):
    assert not is_api_name(name)
    with pytest.raises(ConfigError) as info:
        check_api_name(name, what="api_name")
    assert "\n" not in str(info.value) and "api_name" in str(info.value)


@pytest.mark.parametrize("api, kwargs, expected", [
    ("add_", None, True), ("__iadd__", None, True), ("__setitem__", None, True), ("add_.Tensor", None, True),
    ("relu", {"inplace": True}, True), ("relu", {"inplace": False}, False), ("add", None, False),
    ("__add__", None, False), ("__invert__", None, False), ("__index__", None, False), ("__init__", None, False),
])
def test_inplace_rule(api, kwargs, expected):
    assert is_inplace(api, kwargs) is expected


def test_random_rule_and_tensor_descriptor_rule():
    assert is_random_api("dropout") and is_random_api("native_dropout.default") and is_random_api("rand_like")
    assert not is_random_api("linear") and not is_random_api("linalg.vector_norm")
    assert is_tensor_descriptor({"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": 1.0})
    assert is_tensor_descriptor({"type": "mindspore.Parameter"}) and is_tensor_descriptor({"dtype": "x", "shape": []})
    assert not is_tensor_descriptor({"type": "torch.Size", "value": [2]})
    assert not is_tensor_descriptor({"type": "int", "value": 1}) and not is_tensor_descriptor([1])


@pytest.mark.parametrize("name, backward, call", [
    ("Functional.relu.3.forward", "Functional.relu.3.backward", "Functional.relu.3"),
    ("Module.blocks.0.attn.Attention.forward.2", "Module.blocks.0.attn.Attention.backward.2",
     "Module.blocks.0.attn.Attention.2"),
    ("Tensor.__mul__.0.forward", "Tensor.__mul__.0.backward", "Tensor.__mul__.0"),
    ("optimizer", "optimizer", "optimizer"),
    ("Module.l1.Linear.parameters_grad", "Module.l1.Linear.parameters_grad", "Module.l1.Linear.parameters_grad"),
])
def test_backward_of_and_call_of(name, backward, call):
    from msprobe.core.naming import backward_of, call_of
    assert backward_of(name) == backward and call_of(name) == call


@pytest.mark.parametrize("api, inplace", [
    ("__iadd__", True), ("__setitem__", True), ("add_", True), ("__invert__", False), ("__int__", False),
    ("__index__", False), ("__add__", False), ("add", False)])
def test_one_in_place_rule_for_both_frameworks(api, inplace):
    from msprobe.core.naming import is_inplace
    assert is_inplace(api) is inplace


def test_entry_of_call_adds_the_direction_to_a_call_name():
    from msprobe.core.naming import entry_of_call

    assert entry_of_call("Functional.linear.0", "forward") == "Functional.linear.0.forward"
    assert entry_of_call("Tensor.__mul__.3", "backward") == "Tensor.__mul__.3.backward"
    assert entry_of_call("Torch.linalg.vector_norm.12", "forward") == "Torch.linalg.vector_norm.12.forward"
    assert entry_of_call("not_a_call", "forward") == "not_a_call.forward"
