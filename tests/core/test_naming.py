"""Parsing and building dump entry names."""
import pytest

from msprobe.core.naming import api_name, module_name, params_grad_name, parse_name, strip_call_index


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
