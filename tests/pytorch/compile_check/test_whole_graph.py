"""compile_check compiles the model whole, as the user does, and finds the module at fault by running module sets
eagerly inside that compile; faults planted by FX-rewriting backends (then aot_eager) on a small SwiGLU net."""
import json
import os
import subprocess
import sys

import faulty_backends
import pytest
import torch
from faulty_backends import tiny_input, tiny_net

from msprobe.pytorch import compile_check
from msprobe.pytorch.compile_check import RESULT_FILE, CompileCheckError
from msprobe.pytorch.compile_search import DEFAULT_EPS, stack_path


def _departure_recomputed(model, backend):
    """The whole-graph departure of outputs and parameter gradients, in float32 epsilons, computed here."""
    runs = []
    for compiled in (False, True):
        copy = tiny_net()
        copy.load_state_dict(model.state_dict())
        run = torch.compile(copy, backend=backend) if compiled else copy
        torch.manual_seed(0)
        out = run(tiny_input())
        out.float().sum().backward()
        runs.append((out.detach().double(), torch.cat([p.grad.flatten() for p in copy.parameters()]).double()))
    (eager_out, eager_grads), (out, grads) = runs
    eps = torch.finfo(torch.float32).eps
    return max(float((out - eager_out).norm() / (eps * eager_out.norm())),
               float((grads - eager_grads).norm() / (eps * eager_grads.norm())))


def test_a_fusion_across_modules_is_found_in_the_whole_graph_where_module_by_module_sees_nothing(tmp_path):
    model = tiny_net()
    report = compile_check(model, (tiny_input(),), backend=faulty_backends.swiglu_fusion_layer1,
                           output_path=tmp_path)
    whole = report["whole_graph"]
    assert whole["departs"] and whole["graphs"] == 1
    recomputed = _departure_recomputed(model, faulty_backends.swiglu_fusion_layer1)
    assert whole["departure_eps"] == pytest.approx(recomputed, rel=1e-6) and recomputed > DEFAULT_EPS[32]
    assert whole["departure"] == pytest.approx(recomputed / DEFAULT_EPS[32], rel=1e-6)
    # the fusion needs the gate projection and the SiLU in one graph: the MLP holding both is named, with them
    (found,) = whole["faulty_modules"]
    assert found["module"] == "layers.1.mlp" and report["faulty_module"] == "layers.1.mlp"
    assert sorted(found["fused_across"]) == ["layers.1.mlp.act_fn", "layers.1.mlp.gate_proj"]
    # compiled module by module, as the dump compiles it, the two are apart: nothing departs
    assert report["first_departure"] is None
    written = json.loads((tmp_path / RESULT_FILE).read_text())
    assert written["faulty_module"] == "layers.1.mlp" and written["whole_graph"]["trials"][0]["modules"] == []
    # every trial but the first ran some module eagerly; the good ones are within tolerance
    assert all(t["good"] == (t["metric"] <= 1.0) for t in whole["trials"])
    assert len(whole["trials"]) < 20


@pytest.mark.parametrize("backend, module, fused", [
    (faulty_backends.bf16_silu_layer0, "layers.0.mlp.act_fn", []),
    (faulty_backends.bf16_rsqrt_layer1_norm, "layers.1.norm", []),
    # the residual add is layer 1's own code, fused with a grandchild's linear: compiled alone, down_proj and
    # the MLP agree; the layer departs
    (faulty_backends.residual_epilogue_layer1, "layers.1", ["layers.1.mlp.down_proj"])])
def test_a_fault_in_one_modules_own_code_is_named_at_that_module(tmp_path, backend, module, fused):
    report = compile_check(tiny_net(), (tiny_input(),), backend=backend, output_path=tmp_path,
                           module_by_module=False)
    assert report["whole_graph"]["faulty_modules"] == [{"module": module, "fused_across": fused}]
    assert report["first_departure"] is None and not (tmp_path / "dump_eager").exists()


def test_a_clean_backend_departs_nowhere_in_one_trial(tmp_path):
    report = compile_check(tiny_net(), (tiny_input(),), backend="aot_eager", output_path=tmp_path)
    whole = report["whole_graph"]
    assert not whole["departs"] and whole["faulty_modules"] == [] and report["faulty_module"] is None
    assert len(whole["trials"]) == 1 and whole["departure_eps"] <= 1.0
    assert report["first_departure"] is None


class _NotCompiled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 4)

    @torch.compiler.disable
    def forward(self, x):
        return self.fc(x)


def test_a_check_that_compiled_nothing_fails(tmp_path):
    with pytest.raises(CompileCheckError, match="compiled nothing: Dynamo handed the backend no graph"):
        compile_check(_NotCompiled(), (torch.ones(2, 8),), backend="aot_eager", output_path=tmp_path)


def test_cli_names_the_whole_graph_fault_in_one_line(tmp_path):
    script = tmp_path / "target.py"
    script.write_text(
        "import sys\n"
        f"sys.path.insert(0, {os.path.dirname(faulty_backends.__file__)!r})\n"
        "import torch\n"
        "from faulty_backends import swiglu_fusion_layer1, tiny_net, tiny_input\n"
        "torch._dynamo.register_backend(swiglu_fusion_layer1, name='swiglu_fusion_layer1')\n"
        "def compile_target():\n"
        "    return tiny_net(), (tiny_input(),)\n")
    done = subprocess.run([sys.executable, "-m", "msprobe.cli", "-f", "pytorch", "compile_check", "--script",
                           str(script), "--backend", "swiglu_fusion_layer1", "--whole_graph_only",
                           "-o", str(tmp_path / "out")], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("whole graph:")]
    assert "faulty module: layers.1.mlp (fused across" in line and "first departure" not in done.stdout
    assert json.loads((tmp_path / "out" / RESULT_FILE).read_text())["faulty_module"] == "layers.1.mlp"


def test_dynamo_module_paths_are_read_as_named_modules_paths():
    assert stack_path("L['self'].model.layers[1]._modules['mlp'].act_fn") == "model.layers.1.mlp.act_fn"
    assert stack_path("L['args'][0]._orig_mod.layers.0.norm") == "layers.0.norm"
    assert stack_path("L['self']") == ""
