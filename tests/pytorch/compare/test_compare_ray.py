"""--engine ray on a real 2-node Ray cluster (head + second node, separate processes) on loopback only:
the same reports and job summary as the local engine, on one filesystem and on node-local disks (the second
node in a mount namespace of its own, a tmpfs over the dump folder)."""
import glob
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys

import openpyxl
import pytest
import torch

from msprobe.cli import main
from tests.net import free_port

HERE = os.path.dirname(os.path.abspath(__file__))
_SPEC = importlib.util.spec_from_file_location(
    "make_job_tree", os.path.join(HERE, os.pardir, os.pardir, os.pardir, "benchmarks", "make_job_tree.py"))
make_job_tree = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(make_job_tree)


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """A real one-step dump (statistics and xor fingerprints) replicated into 4 ranks; rank 2's second linear
    is off by 1.5x, and its output's fingerprint differs."""
    from msprobe.pytorch import PrecisionDebugger

    root = tmp_path_factory.mktemp("rayjob")
    (root / "config.json").write_text(json.dumps({"task": "statistics", "dump_path": str(root / "dump"),
                                                  "level": "L1", "statistics": {"summary_mode": "xor"}}))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
    debugger = PrecisionDebugger(config_path=str(root / "config.json"), model=model)
    debugger.start()
    model(torch.randn(4, 8)).sum().backward()
    debugger.stop()
    debugger.step()
    debugger.close()
    compare_json = make_job_tree.make_tree(str(root / "dump" / "step0" / "rank"), str(root / "tree"), ranks=4,
                                           faults=[(2, 0, "Functional.linear.1.forward", 1.5)])
    faulty = root / "tree" / "npu" / "step0" / "rank2" / "dump.json"
    dump = json.loads(faulty.read_text())
    output = dump["data"]["Functional.linear.1.forward"]["output"][0]
    output["xor"] = format(int(output["xor"], 16) ^ 1, "032x")
    faulty.write_text(json.dumps(dump))
    return compare_json



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


def _cluster(tmp_path, *args):
    """ray_cluster.sh ARGS in a network namespace of our own: ({node id: "head"|"second"}, [compare i's
    (exit status, output)]); the script stops its cluster whatever happens."""
    logs = tmp_path / "raylogs"
    logs.mkdir()
    local, rest = (list(args[:3]), args[3:]) if args[0] == "--node-local" else ([], args)
    proc = subprocess.run(["unshare", "-n", "bash", os.path.join(HERE, "ray_cluster.sh"), *local, str(free_port()),
                           str(logs), *map(str, rest)], capture_output=True, text=True, timeout=540,
                          env=dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]))
    node_log = logs / "node.log"
    assert proc.returncode == 0 and "NODES 2" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-3000:] + (
        node_log.read_text()[-2000:] if node_log.exists() else "")
    nodes = dict(re.findall(r"^NODE (\w+) (head|second)$", proc.stdout, re.M))
    runs = re.findall(r"^COMPARE \d+\n(.*?)^RC \d+ (\d+)$", proc.stdout, re.M | re.S)
    assert sorted(nodes.values()) == ["head", "second"] and len(runs) == len(rest) // 2, proc.stdout[-3000:]
    return nodes, [(int(rc), output) for output, rc in runs]


def _first_divergence(out):
    """first_divergence.json with each dump path cut to step*/rank*/dump.json (the trees' roots differ)."""
    text = open(os.path.join(out, "first_divergence.json")).read()
    return json.loads(re.sub(r'"[^"]*/(step\d+/rank\d+/dump\.json)"', r'"\1"', text))


def _same_reports(local, ray_out):
    first = _first_divergence(local)
    assert (first["rank"], first["call"], len(first["ranks"])) == (2, "Functional.linear.1.forward", 4)
    assert _first_divergence(ray_out) == first
    local_cells, ray_cells = _cells(local), _cells(ray_out)
    assert len(local_cells) == 4 and local_cells == ray_cells
    local_parted, local_pairs = _pairs(local)
    ray_parted, ray_pairs = _pairs(ray_out)
    assert ray_pairs == local_pairs
    assert (ray_parted["rank"], ray_parted["call"]) == (local_parted["rank"], local_parted["call"]) == \
        (2, "Functional.linear.1.forward")


def test_ray_engine_on_two_nodes_gives_the_local_engine_reports(job, tmp_path):
    local = tmp_path / "local"
    assert main(["-f", "pytorch", "compare", "-i", job, "-o", str(local), "-p", "2"]) == 0
    _, [(rc, output)] = _cluster(tmp_path, job, tmp_path / "ray")
    assert rc == 0 and "of 2 node(s)" in output, output[-3000:]
    _same_reports(local, tmp_path / "ray")


def _split_disks(job, tmp_path):
    """The job's ranks 0-1 in DISK (what the head sees), ranks 2-3 in SECOND (what the second node will see
    under DISK); DISK/bench_head holds every rank's bench dumps, on the head's disk only."""
    tree = os.path.dirname(job)
    disk, second = tmp_path / "disk", tmp_path / "second"
    for side in ("npu", "bench"):
        for rank in range(4):
            target = (disk if rank < 2 else second) / side / "step0" / f"rank{rank}"
            shutil.copytree(os.path.join(tree, side, "step0", f"rank{rank}"), target)
            if side == "bench":
                shutil.copytree(target, disk / "bench_head" / "step0" / f"rank{rank}")
    whole, torn = tmp_path / "whole.json", tmp_path / "torn.json"
    whole.write_text(json.dumps({"npu_path": str(disk / "npu"), "bench_path": str(disk / "bench")}))
    torn.write_text(json.dumps({"npu_path": str(disk / "npu"), "bench_path": str(disk / "bench_head")}))
    return disk, second, whole, torn


def test_ray_engine_on_node_local_disks_runs_each_pair_where_its_dumps_are(job, tmp_path):
    local = tmp_path / "local"
    assert main(["-f", "pytorch", "compare", "-i", job, "-o", str(local), "-p", "2"]) == 0
    disk, second, whole, torn = _split_disks(job, tmp_path)
    assert sorted(os.listdir(disk / "npu" / "step0")) == ["rank0", "rank1"]  # the driver sees half the job
    nodes, [(rc, output), (torn_rc, torn_output)] = _cluster(
        tmp_path, "--node-local", disk, second, whole, tmp_path / "ray", torn, tmp_path / "torn")
    assert rc == 0 and "compared on 2 of 2 node(s), each where its dumps are" in output, output[-3000:]
    ran = dict(re.findall(r"ray: pair '(\S+)' ran on node (\w+)", output))
    role = {tag: nodes[node] for tag, node in ran.items()}
    assert role == {"_step0_rank0-rank0": "head", "_step0_rank1-rank1": "head",
                    "_step0_rank2-rank2": "second", "_step0_rank3-rank3": "second"}, output[-3000:]
    _same_reports(local, tmp_path / "ray")
    # ranks 2-3: NPU dumps on the second node only, bench dumps on the head only
    errors = [line for line in torn_output.splitlines() if "[ERROR]" in line]
    assert torn_rc == 1 and "Traceback" not in torn_output, torn_output[-3000:]
    assert len(errors) == 1, torn_output[-3000:]
    assert "pair '_step0_rank2-rank2'" in errors[0] and "is on 1 node(s)" in errors[0] and \
        "(and 1 more pair(s))" in errors[0], errors[0]


def test_ray_engine_without_ray_says_so_in_one_line(job, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)   # an installation without the [ray] extra
    assert main(["-f", "pytorch", "compare", "-i", job, "-o", str(tmp_path / "o"), "--engine", "ray"]) == 1
    err = capsys.readouterr()
    lines = [line for line in (err.out + err.err).splitlines() if "[ERROR]" in line]
    assert lines == [lines[0]] and "pip install 'msprobe[ray]'" in lines[0]
