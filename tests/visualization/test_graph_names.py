"""Graph code reads node ids through core.naming: layer names of module calls, API keys without the call
counter, module paths for layer mapping."""
from msprobe.visualization.matching import _api_key, _module_call, _path_of
from msprobe.visualization.stacks import _layer_name


def test_layer_name_is_the_attribute_of_the_module_call():
    assert _layer_name("Module.encoder.layers.0.Linear.forward.0") == "0"
    assert _layer_name("Module.blocks.fc1.Linear.backward.3") == "fc1"
    assert _layer_name("Cell.dense.Dense.forward.0") == "dense"
    assert _layer_name("Module.Linear.forward.0") == ""  # no path: the root module
    assert _layer_name("Functional.linear.0.forward") == ""


def test_api_key_drops_the_call_counter_and_keeps_module_ids():
    assert _api_key("Tensor.__mul__.3.forward", None) == "Tensor.__mul__.forward"
    assert _api_key("Functional.scaled_dot_product_attention.12.backward", None) == \
        "Functional.scaled_dot_product_attention.backward"
    assert _api_key("Module.a.Linear.forward.0", None) == "Module.a.Linear.forward.0"
    assert _api_key("Mint.add.0.forward", lambda n: n.replace("Mint.", "Torch.")) == "Torch.add.forward"


def test_module_paths_and_calls():
    assert _path_of("Module.encoder.layers.0.Linear.forward.2") == "encoder.layers.0"
    assert _module_call("Module.a.Linear.forward.2").index == "2"
    assert _module_call("Module.a.Linear.parameters_grad") is None
    assert _module_call("Functional.linear.0.forward") is None
