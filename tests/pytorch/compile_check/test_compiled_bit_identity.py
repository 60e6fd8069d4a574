"""Training a torch.compile'd (Inductor) bfloat16 model under the debugger: bit-identical at L1 and L2; at
L0/mix each dumped step trains exactly like the model compiled module by module (the graph is broken at
module boundaries to observe them), which is not bit-identical with the whole-model compile, unless
`shadow_compiled` is set: then the step runs the user's graph and the boundaries come from a second,
no-grad forward (bit-identical, dropout and BatchNorm statistics included)."""
import json

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from msprobe.core.compare.advisor import find_suspect
from msprobe.core.io.load import load_dump
from msprobe.core.compare.pair import compare_tables
from msprobe.pytorch import PrecisionDebugger
from tests.pytorch.compile_check.compiled_training import plain_model, train_compiled



def _stateful_model():
    """Random (dropout) and stateful (BatchNorm running statistics) modules besides the fused ones."""
    return nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.LayerNorm(16), nn.GELU(), nn.Dropout(0.3),
                         nn.Linear(16, 4))


def _train(level, dump_path, per_module=False, build=plain_model, shadow=False):
    """3 SGD steps of a bf16 Sequential compiled with Inductor (whole, or each submodule on its own); the
    parameters and buffers after. With `level`, every step runs under the debugger."""
    return train_compiled(level, dump_path, per_module, build, shadow, dtype=torch.bfloat16)


def _same(a, b):
    return all(torch.equal(x, y) for x, y in zip(a, b))


@pytest.fixture(scope="module")
def references():
    return _train(None, None), _train(None, None, per_module=True)


@pytest.mark.parametrize("level", ["L1", "L2"])
def test_bf16_compiled_training_is_bit_identical_at_api_and_aten_levels(tmp_path, references, level):
    whole, _ = references
    assert _same(_train(level, tmp_path), whole)


@pytest.mark.parametrize("level", ["L0", "mix"])
def test_bf16_l0_dump_trains_like_the_model_compiled_module_by_module(tmp_path, references, level):
    whole, per_module = references
    debugged = _train(level, tmp_path)
    # the window's compile, broken at every module boundary, is exactly the per-module compile ...
    assert _same(debugged, per_module)
    # ... and fusing across boundaries (LayerNorm -> GELU kept in float32 inside one kernel) rounds otherwise
    assert not _same(per_module, whole)


@pytest.mark.parametrize("level", ["L0", "mix"])
def test_bf16_shadow_compiled_training_is_bit_identical_and_records_module_boundaries(tmp_path, level):
    from torch._dynamo.utils import counters

    whole = _train(None, None, build=_stateful_model)
    debugged = _train(level, tmp_path, build=_stateful_model, shadow=True)
    assert sum(counters["recompiles"].values()) == 0  # counted since the reset at the start of the run
    assert _same(debugged, whole)  # parameters and BatchNorm statistics, with dropout drawing in the step
    dump = json.loads((tmp_path / "dump" / "step2" / "rank" / "dump.json").read_text())
    modules = [name for name in dump["data"] if name.startswith("Module.")]
    assert [name for name in modules if name.endswith("forward.0")] == [
        "Module.0.Linear.forward.0", "Module.1.BatchNorm1d.forward.0", "Module.2.LayerNorm.forward.0",
        "Module.3.GELU.forward.0", "Module.4.Dropout.forward.0", "Module.5.Linear.forward.0"]
    assert "Module.5.Linear.parameters_grad" in modules and not any(".backward." in name for name in modules)
    assert "shadow_compiled" in dump["compiled_regions"][0]["observed"]


def _tanh_gelu(graph_module, example_inputs):
    for node in graph_module.graph.nodes:
        if node.op == "call_function" and node.target in (F.gelu, torch._C._nn.gelu):
            node.kwargs = {**node.kwargs, "approximate": "tanh"}
    graph_module.recompile()
    return graph_module.forward


def test_shadow_compiled_dump_records_compiled_outputs(tmp_path):
    """The boundaries are outputs of compiled code: a backend that changes the GELU is seen there."""
    x = torch.randn(5, 8, generator=torch.Generator().manual_seed(1))
    paths = {}
    for name, backend in (("eager", None), ("compiled", _tanh_gelu)):
        torch._dynamo.reset()
        torch.manual_seed(0)
        model = plain_model()
        model = torch.compile(model, backend=backend) if backend else model
        config = tmp_path / f"{name}.json"
        config.write_text(json.dumps({"task": "statistics", "level": "L0", "dump_path": str(tmp_path / name),
                                      "statistics": {"shadow_compiled": True}}))
        debugger = PrecisionDebugger(config_path=str(config), model=model)
        debugger.start()
        model(x).sum().backward()
        debugger.stop()
        debugger.close()
        paths[name] = str(tmp_path / name / "step0" / "rank" / "dump.json")
    suspect = find_suspect(compare_tables(load_dump(paths["compiled"]), load_dump(paths["eager"])))
    assert suspect is not None and suspect.entry == "Module.2.GELU.forward.0" and suspect.kind == "cause"
