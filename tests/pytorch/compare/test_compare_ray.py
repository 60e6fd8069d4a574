"""--engine ray on a real 2-node Ray cluster (head + second node, separate processes) on loopback only:
the same reports and job summary as the local engine."""
import glob
import importlib.util
import json
import os
import re
import socket
import subprocess
import sys

import openpyxl
import pytest
import torch

from msprobe.cli import main

HERE = os.path.dirname(os.path.abspath(__file__))
_SPEC = importlib.util.spec_from_file_location(
    "make_job_tree", os.path.join(HERE, os.pardir, os.pardir, os.pardir, "benchmarks", "make_job_tree.py"))
make_job_tree = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(make_job_tree)


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """A real one-step dump replicated into 4 ranks; rank 2's second linear is off by 1.5x."""
    from msprobe.pytorch import PrecisionDebugger

    root = tmp_path_factory.mktemp("rayjob")
    (root / "config.json").write_text(json.dumps({"task": "statistics", "dump_path": str(root / "dump"),
                                                  "level": "L1", "statistics": {}}))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
    debugger = PrecisionDebugger(config_path=str(root / "config.json"), model=model)
    debugger.start()
    model(torch.randn(4, 8)).sum().backward()
    debugger.stop()
    debugger.step()
    debugger.close()
    return make_job_tree.make_tree(str(root / "dump" / "step0" / "rank"), str(root / "tree"), ranks=4,
                                   faults=[(2, 0, "Functional.linear.1.forward", 1.5)])


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _cells(out):
    """{report name without timestamp: rows of cell values}."""
    found = {}
    for path in glob.glob(os.path.join(out, "compare_result_*.xlsx")):
        name = re.sub(r"_\d{14}\.xlsx$", "", os.path.basename(path))
        sheet = openpyxl.load_workbook(path, read_only=True).active
        found[name] = [list(row) for row in sheet.iter_rows(values_only=True)]
    return found


def _pairs(out):
    job = json.loads(open(os.path.join(out, "job_summary.json")).read())
    for pair in job["pairs"]:
        pair["report"] = re.sub(r"_\d{14}\.xlsx$", "", os.path.basename(pair["report"]))
    return job["parted"], job["pairs"]


def test_ray_engine_on_two_nodes_gives_the_local_engine_reports(job, tmp_path):
    local = tmp_path / "local"
    assert main(["-f", "pytorch", "compare", "-i", job, "-o", str(local), "-p", "2"]) == 0
    ray_out, ray_tmp = tmp_path / "ray", tmp_path / "raytmp"
    ray_tmp.mkdir()
    proc = subprocess.run(["unshare", "-n", "bash", os.path.join(HERE, "ray_cluster.sh"), str(_free_port()),
                           str(ray_tmp), job, str(ray_out)], capture_output=True, text=True, timeout=540,
                          env=dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "NODES 2" in proc.stdout and "compared on 2 node(s)" in proc.stdout + proc.stderr
    local_cells, ray_cells = _cells(local), _cells(ray_out)
    assert len(local_cells) == 4 and local_cells == ray_cells
    local_parted, local_pairs = _pairs(local)
    ray_parted, ray_pairs = _pairs(ray_out)
    assert ray_pairs == local_pairs
    assert (ray_parted["rank"], ray_parted["call"]) == (local_parted["rank"], local_parted["call"]) == \
        (2, "Functional.linear.1.forward")


def test_ray_engine_without_ray_says_so_in_one_line(job, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)   # an installation without the [ray] extra
    assert main(["-f", "pytorch", "compare", "-i", job, "-o", str(tmp_path / "o"), "--engine", "ray"]) == 1
    err = capsys.readouterr()
    lines = [line for line in (err.out + err.err).splitlines() if "[ERROR]" in line]
    assert lines == [lines[0]] and "pip install 'msprobe[ray]'" in lines[0]
