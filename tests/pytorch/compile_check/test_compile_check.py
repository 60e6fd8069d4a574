"""compile_check: eager vs torch.compile per module on tiny BERTs; the first departing module, the report,
the standalone repro and the FX graphs of the suspect."""
import json
import os
import subprocess
import sys

import faulty_backends
import pytest
import torch
from faulty_backends import LOW_PRECISION_MODULE, example_ids, tiny_bert

from msprobe.pytorch import compile_check
from msprobe.pytorch.compile_check import RESULT_FILE

GELU_PATH = "encoder.layer.0.intermediate.intermediate_act_fn"


def test_tanh_gelu_backend_is_named_first_with_report_and_repro(tmp_path):
    report = compile_check(tiny_bert(), (example_ids(),), backend=faulty_backends.tanh_gelu, output_path=tmp_path)
    first = report["first_departure"]
    assert first["module"] == GELU_PATH and first["phase"] == "forward" and first["kind"] == "cause"
    # at the model's outputs the tanh approximation stays within the whole graph's allowance (64 float32 eps, the
    # GELU's inputs are small in a tiny BERT): module by module is the finer view, which is why both run
    whole = report["whole_graph"]
    assert not whole["departs"] and 0 < whole["departure_eps"] < 64 and report["faulty_module"] is None
    assert first["call"] == f"Module.{GELU_PATH}.GELUActivation.forward.0"
    written = json.loads((tmp_path / RESULT_FILE).read_text())
    assert written["first_departure"] == first
    assert os.path.isfile(report["compare_result"]) and report["compare_result"].endswith(".xlsx")
    ranked = {row["call"]: row for row in written["ranking"]}
    assert ranked[first["call"]]["beyond_tolerance"]
    # modules before the GELU agree within tolerance
    assert not ranked["Module.embeddings.word_embeddings.Embedding.forward.0"]["beyond_tolerance"]
    assert [row["departure"] for row in written["ranking"]] == sorted((r["departure"] for r in written["ranking"]),
                                                                      reverse=True)
    # the repro: no msprobe, the GELU module alone departs under the same backend
    script = report["repro"]["script"]
    assert "msprobe" not in "".join(line for line in open(script) if line.startswith(("import", "from")))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, script], capture_output=True, text=True, env=env, timeout=300,
                          cwd=tmp_path)
    assert done.returncode == 1, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["departs"] and result["module"] == GELU_PATH


def test_low_precision_matmul_module_is_named_first_and_its_graph_kept(tmp_path):
    from torch._dynamo.utils import counters

    before = sum(counters["recompiles"].values())
    report = compile_check(tiny_bert(), (example_ids(),), backend=faulty_backends.low_precision_matmul,
                           output_path=tmp_path, dump_graphs=True, whole_graph=False)
    # no recompiles, though other BERTs were checked in this process before (frames they share, such
    # as transformers' decorator wrappers, are compiled per window compile)
    assert sum(counters["recompiles"].values()) == before
    assert report["first_departure"]["module"] == LOW_PRECISION_MODULE
    assert report["graphs"]
    listing = json.loads((tmp_path / "graphs" / "graphs.json").read_text())
    assert listing["module"] == LOW_PRECISION_MODULE
    linears = [node for graph in listing["graphs"] for node in graph["nodes"]
               if node["module"] == LOW_PRECISION_MODULE and node["op"] == "call_function"]
    # the graphs as Dynamo handed them to the backend: the module's one linear, mapped by its weight
    assert [node["target"] for node in linears] == [str(torch.nn.functional.linear)]
    assert all(os.path.isfile(path) and "def forward" in open(path).read() for path in report["graphs"])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_clean_inductor_model_has_no_departure(tmp_path, dtype):
    report = compile_check(tiny_bert(dtype), (example_ids(),), backend="inductor", output_path=tmp_path)
    assert report["first_departure"] is None, report["first_departure"]
    # compiled whole, Inductor stays within the default allowance (one trial: no search)
    assert not report["whole_graph"]["departs"] and len(report["whole_graph"]["trials"]) == 1
    assert report["ranking"]
    assert not any(row["beyond_tolerance"] for row in report["ranking"] if not row["parameters_grad"])


def test_cli_runs_a_script_target_with_a_registered_backend(tmp_path):
    script = tmp_path / "target.py"
    script.write_text(
        "import sys\n"
        f"sys.path.insert(0, {os.path.dirname(faulty_backends.__file__)!r})\n"
        "import torch\n"
        "from faulty_backends import tanh_gelu, tiny_bert, example_ids\n"
        "torch._dynamo.register_backend(tanh_gelu, name='tanh_gelu')\n"
        "def compile_target():\n"
        "    return tiny_bert(), (example_ids(),)\n")
    done = subprocess.run([sys.executable, "-m", "msprobe.cli", "-f", "pytorch", "compile_check", "--script", str(script),
                           "--backend", "tanh_gelu", "--forward_only", "-o", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"first departure: Module.{GELU_PATH}.GELUActivation.forward.0" in done.stdout
    report = json.loads((tmp_path / "out" / RESULT_FILE).read_text())
    assert report["first_departure"]["module"] == GELU_PATH
    assert not any("backward" in row["call"] for row in report["ranking"])


def test_cli_target_returning_something_else_is_one_error_line(tmp_path, capsys):
    from msprobe.cli import main

    script = tmp_path / "target.py"
    script.write_text("def compile_target():\n    return 3\n")
    code = main(["-f", "pytorch", "compile_check", "--script", str(script), "-o", str(tmp_path / "out")])
    out = capsys.readouterr()
    assert code != 0 and "Traceback" not in out.err + out.out
    assert "must return (model, example_inputs)" in out.err + out.out


def test_inductor_kernels_of_the_suspect_are_mapped_to_its_fx_nodes(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.Linear(16, 4))
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(1))
    report = compile_check(model, (x,), backend=faulty_backends.wide_eps_layer_norm_inductor,
                           output_path=tmp_path, dump_graphs=True, whole_graph=False)
    assert report["first_departure"]["module"] == "1"
    listing = json.loads((tmp_path / "graphs" / "graphs.json").read_text())
    # the LayerNorm's graph piece as Inductor compiled it (after other models in the process, Dynamo may
    # first hand over a graph with LayerNorm's eps as a symbol, whose compile it drops: no kernels)
    graphs = [g for g in listing["graphs"] if "1" in g["modules"] and g["kernels"]]
    assert graphs
    for graph in graphs:
        layer_norm_nodes = {n["node"] for n in graph["nodes"] if n["module"] == "1" and n["op"] == "call_function"}
        forward = [k for k in graph["kernels"] if k["phase"] == "forward" and not k["extern"]]
        # the generated C++ kernel that computes the layer norm, mapped to the FX node of the LayerNorm
        (kernel,) = [k for k in forward if "native_layer_norm" in k["kernel"]]
        assert kernel["kernel"].startswith("cpp_fused_") and set(kernel["fx_nodes"]) == layer_norm_nodes
        assert kernel["modules"] == ["1"]
        code = (tmp_path / "graphs" / graph["file"].replace(".py", ".inductor_forward.py")).read_text()
        assert f"{kernel['kernel']} = async_compile.cpp_pybinding" in code
        backward = [k for k in graph["kernels"] if k["phase"] == "backward" and not k["extern"]]
        assert backward and all(k["kernel"].startswith("cpp_fused_") and k["aten_nodes"] for k in backward)
        # the layer norm's backward kernel maps back to the same FX node
        (grad_kernel,) = [k for k in backward if "native_layer_norm_backward" in k["kernel"]]
        assert set(grad_kernel["fx_nodes"]) == layer_norm_nodes and grad_kernel["modules"] == ["1"]
