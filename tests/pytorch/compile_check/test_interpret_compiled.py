"""interpret_compiled: a torch.compile'd model dumped at L1/L2/mix records every call inside the compiled
region under its eager name (Dynamo's graph run through torch.fx.Interpreter); without the option the
region runs the user's graph and dump.json notes it was not observed call by call."""
import json

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from msprobe.pytorch import PrecisionDebugger



@pytest.fixture(autouse=True)
def fresh_dynamo():
    """Dynamo's state starts clean: after many models compiled in one process, Dynamo stops compiling a
    shared frame (Linear.forward) at its recompile limit and runs it eagerly, unobserved."""
    torch._dynamo.reset()
    yield

class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp, self.norm, self.act, self.out = nn.Linear(8, 16), nn.LayerNorm(16), nn.GELU(), nn.Linear(16, 4)

    def forward(self, x):
        return F.softmax(self.out(self.act(self.norm(self.inp(x)))) * 2 + 1, dim=-1)


def _graph_backend(graph_module, example_inputs):
    _graph_backend.compiles += 1
    return graph_module.forward


_graph_backend.compiles = 0


def _dump(tmp_path, name, level, compiled, interpret):
    """Two steps (forward and backward) of Tiny under the debugger; step 1's dump.json."""
    torch.manual_seed(0)
    model = Tiny()
    if compiled:
        model = torch.compile(model, backend=_graph_backend)
    config = tmp_path / f"{name}.json"
    config.write_text(json.dumps({"task": "statistics", "level": level, "dump_path": str(tmp_path / name),
                                  "statistics": {"interpret_compiled": interpret}}))
    debugger = PrecisionDebugger(config_path=str(config), model=model)
    x = torch.randn(3, 8, generator=torch.Generator().manual_seed(1))
    for _ in range(2):
        debugger.start()
        model(x).pow(2).sum().backward()
        debugger.stop()
        debugger.step()
    debugger.close()
    return json.loads((tmp_path / name / "step1" / "rank" / "dump.json").read_text())


@pytest.mark.parametrize("level", ["L1", "L2", "mix"])
def test_interpreted_compiled_dump_equals_the_eager_dump(tmp_path, level):
    from torch._dynamo.utils import counters

    eager = _dump(tmp_path, "eager", level, compiled=False, interpret=False)
    before = sum(counters["recompiles"].values())
    compiled = _dump(tmp_path, "compiled", level, compiled=True, interpret=True)
    assert sum(counters["recompiles"].values()) == before
    # the ops inside the region, with eager names and counts, forward and backward, same statistics
    assert list(compiled["data"]) == list(eager["data"])
    assert compiled["data"] == eager["data"]
    inside = {"L1": "Functional.layer_norm.0.forward", "mix": "Functional.layer_norm.0.forward",
              "L2": "Aten.native_layer_norm.0.forward"}[level]
    assert inside in compiled["data"]
    (note,) = compiled["compiled_regions"]
    from msprobe.pytorch.dump import compiled as regions

    # mix has module hooks: where Dynamo compiles no hooked module call (torch 2.11; the probe is checked in
    # test_pt_dump_compiled.py), the region ran eagerly with the modes on, and the note says so
    how = "torch.fx.Interpreter" if level != "mix" or regions._breaks_inside_modules() else "run eagerly with"
    assert how in note["observed"] and "eager kernels" in note["not_observed"]


def test_without_the_option_the_region_runs_the_users_graph_and_is_noted(tmp_path):
    compiles = _graph_backend.compiles
    dump = _dump(tmp_path, "plain", "L1", compiled=True, interpret=False)
    assert _graph_backend.compiles == compiles + 1  # the user's graph, compiled once, ran in both steps
    assert not any(name.startswith(("Functional.linear", "Functional.layer_norm")) for name in dump["data"])
    assert "Tensor.pow.0.forward" in dump["data"]
    (note,) = dump["compiled_regions"]
    assert "user's compiled graph" in note["observed"]


def test_mix_where_dynamo_cannot_compile_a_hooked_module_records_the_eager_calls(tmp_path, monkeypatch):
    """torch 2.11's Dynamo runs a built-in module's call that holds our hook eagerly (no graph at all), so there
    the hooked levels take the leaf-by-leaf window (forced here on any torch): interpret_compiled at mix runs the
    region's module eagerly with the modes on, which records exactly the eager dump's calls, the glue of
    Tiny.forward (the `* 2 + 1`, the softmax) included."""
    from msprobe.pytorch.dump import compiled as regions

    monkeypatch.setattr(regions, "_BREAKS_INSIDE_MODULES", False)
    eager = _dump(tmp_path, "eager", "mix", compiled=False, interpret=False)
    compiled = _dump(tmp_path, "compiled", "mix", compiled=True, interpret=True)
    assert compiled["data"] == eager["data"] and "Tensor.__mul__.0.forward" in compiled["data"]
    (note,) = compiled["compiled_regions"]
    assert "run eagerly with the dump's modes on" in note["observed"] and "eager kernels" in note["not_observed"]
