"""code_mapping on a real IR and real L2 dumps (tensor and statistics) of one MindSpore 2.x GRAPH_MODE
training step on CPU; each run is a subprocess because graph mode and the native dump are process-wide."""
import csv
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys

import pytest

from msprobe.cli import main
from msprobe.mindspore.code_mapping.ir_parser import IrNode
from msprobe.mindspore.code_mapping.matcher import ScopeMatcher

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ms_code_mapping_script.py")
FC_SCOPE = "Default/network-WithLossCell/_backbone-Net/fc-Dense"


def _script_line():
    """Line number of the network's construct line, found in the script text (not in the IR)."""
    with open(SCRIPT) as handle:
        return next(i for i, line in enumerate(handle, 1) if "CODE_MAPPING_MARK" in line)


@pytest.fixture(scope="module")
def graph_runs(tmp_path_factory):
    """{'tensor': (ir file, dump dir), 'statistics': (...)}: both runs at once, to halve the wait."""
    root = tmp_path_factory.mktemp("code_mapping")
    runs = {}
    for task in ("tensor", "statistics"):
        config = root / f"{task}.json"
        config.write_text(json.dumps({"task": task, "dump_path": str(root / f"dump_{task}"), "level": "L2"}))
        env = dict(os.environ, MS_DEV_SAVE_GRAPHS="2", MS_DEV_SAVE_GRAPHS_PATH=str(root / f"ir_{task}"))
        runs[task] = subprocess.Popen([sys.executable, SCRIPT, str(config)], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True)
    result = {}
    for task, process in runs.items():
        output, _ = process.communicate(timeout=180)
        assert process.returncode == 0, output[-2000:]
        (ir_file,) = glob.glob(str(root / f"ir_{task}" / "graph_build_0_*.ir"))
        result[task] = (ir_file, str(root / f"dump_{task}"))
    return result


def _read(path):
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def _run_cli(*args):
    return main(["-f", "mindspore", "code_mapping", *args])


def test_tensor_dump_kernels_map_to_the_model_source(graph_runs, tmp_path):
    ir_file, dump = graph_runs["tensor"]
    assert _run_cli("--ir", ir_file, "--dump_data", dump, "--output", str(tmp_path / "out")) == 0
    (mapping,) = glob.glob(str(tmp_path / "out" / "code_mapping_*.csv"))
    rows = _read(mapping)
    assert list(rows[0]) == ["File Path", "Code Stack", "Scope Name"]
    npy_files = sorted(glob.glob(os.path.join(dump, "**", "*.npy"), recursive=True))
    assert sorted(row["File Path"] for row in rows) == npy_files
    by_kernel = {os.path.basename(r["File Path"]).split(".")[1]: r for r in rows}
    source = f"{SCRIPT}:{_script_line()}"
    forward = by_kernel["Default_network-WithLossCell__backbone-Net_fc-Dense_MatMul-op0"]
    assert forward["Scope Name"] == f"{FC_SCOPE}/MatMul-op0"
    assert any(line.startswith(f"In file {source},") for line in forward["Code Stack"].splitlines())
    assert "self.matmul(x, self.weight)" in forward["Code Stack"]  # the line inside nn.Dense too
    # a backward kernel gets the source of its forward node (forward_unique_id), not autodiff internals
    backward = by_kernel["Gradients_Default_network-WithLossCell__backbone-Net_fc-Dense_Grad_MatMul_MatMul-op0"]
    assert backward["Scope Name"] == f"Gradients/{FC_SCOPE}/Grad_MatMul/MatMul-op0"
    assert backward["Code Stack"] == forward["Code Stack"]
    relu_grad = by_kernel["Gradients_Default_network-WithLossCell__backbone-Net_Grad_ReLU_ReluGrad-op0"]
    assert f"In file {source}," in relu_grad["Code Stack"]
    assert by_kernel["fc_weight"]["Scope Name"] == "" and by_kernel["fc_weight"]["Code Stack"] == ""  # parameters


def test_single_file_and_renamed_files_through_mapping_csv(graph_runs, tmp_path):
    ir_file, dump = graph_runs["tensor"]
    (relu_out,) = glob.glob(os.path.join(dump, "**", "ReLU.*.output.0.*.npy"), recursive=True)
    assert _run_cli("--ir", ir_file, "--dump_data", relu_out, "--output", str(tmp_path / "one")) == 0
    (row,) = _read(glob.glob(str(tmp_path / "one" / "code_mapping_*.csv"))[0])
    assert row["Scope Name"] == "Default/network-WithLossCell/_backbone-Net/ReLU-op0"
    # MindSpore renames files whose name passes 255 characters and lists them in mapping.csv
    renamed = tmp_path / "renamed"
    renamed.mkdir()
    shutil.copy(relu_out, renamed / "844354976.npy")
    (renamed / "mapping.csv").write_text(f"844354976.npy,{os.path.basename(relu_out)}\n")
    assert _run_cli("--ir", ir_file, "--dump_data", str(renamed), "--output", str(tmp_path / "two")) == 0
    (row,) = _read(glob.glob(str(tmp_path / "two" / "code_mapping_*.csv"))[0])
    assert row["File Path"].endswith("844354976.npy") and row["Scope Name"].endswith("ReLU-op0")


def test_statistic_csv_gets_a_new_file_beside_it_and_stays_untouched(graph_runs):
    ir_file, dump = graph_runs["statistics"]
    (statistic,) = glob.glob(os.path.join(dump, "**", "statistic.csv"), recursive=True)
    with open(statistic, "rb") as handle:
        before = hashlib.sha256(handle.read()).hexdigest()
    assert _run_cli("--ir", ir_file, "--dump_data", dump) == 0
    with open(statistic, "rb") as handle:
        assert hashlib.sha256(handle.read()).hexdigest() == before
    (mapped,) = glob.glob(os.path.join(os.path.dirname(statistic), "statistic_code_mapping_*.csv"))
    original = _read(statistic)
    rows = _read(mapped)
    assert list(rows[0]) == list(original[0]) + ["Code Stack", "Scope Name"]  # no spurious column
    assert [{k: r[k] for k in original[0]} for r in rows] == original
    bias_add = [r for r in rows if r["Op Name"].endswith("fc-Dense_BiasAdd-op0")]
    assert bias_add and all(r["Scope Name"] == f"{FC_SCOPE}/BiasAdd-op0" for r in bias_add)
    assert all(f"{SCRIPT}:{_script_line()}" in r["Code Stack"] for r in bias_add)


def test_bad_inputs_give_one_line_errors(graph_runs, tmp_path, capsys):
    ir_file, dump = graph_runs["tensor"]
    assert _run_cli("--ir", str(tmp_path / "missing.ir"), "--dump_data", dump) == 1
    (tmp_path / "empty").mkdir()
    assert _run_cli("--ir", ir_file, "--dump_data", str(tmp_path / "empty")) == 1
    (tmp_path / "not_ir.ir").write_text("hello\n")
    assert _run_cli("--ir", str(tmp_path / "not_ir.ir"), "--dump_data", dump) == 1
    out = capsys.readouterr().out
    assert "does not exist" in out and "no .npy file and no statistic.csv" in out and "holds no graph node" in out
    assert "Traceback" not in out


def test_matcher_does_not_confuse_op1_with_op12():
    nodes = {key: IrNode(key.replace("_", "/")) for key in ("Default_Mul-op1", "Default_Mul-op12", "Default_Add-op3")}
    matcher = ScopeMatcher(nodes)
    assert [n.scope for n in matcher.match("Default_Mul-op12")] == ["Default/Mul-op12"]
    assert [n.scope for n in matcher.match("Fused_Default_Mul-op1Default_Add-op3")] == ["Default/Mul-op1",
                                                                                     "Default/Add-op3"]
    assert matcher.match("Default_Sub-op1") == []
