"""Whole-job compare: every (step, rank) pair of two real 4-rank gloo runs, job_summary.json, where it parted."""
import json
import os
import subprocess
import sys

import pytest

from msprobe.cli import main
from tests.net import free_port

JOB = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "fixtures", "gloo_job.py")



def _run_job(root, mode):
    root.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, JOB, str(root), str(free_port()), "statistics", mode],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return str(root / "dump")


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("jobcmp")
    return _run_job(root / "npu", "perturb"), _run_job(root / "bench", "clean")


def test_job_compare_writes_every_pair_and_names_where_the_job_parted(two_runs, tmp_path):
    npu, bench = two_runs
    # the premise: after the all_reduce every rank differs, so rank 0 differs too
    for rank in range(4):
        sides = [json.loads(open(os.path.join(root, "step1", f"rank{rank}", "dump.json")).read())["data"]
                 for root in (npu, bench)]
        assert sides[0]["Distributed.all_reduce.0.forward"]["output"][0]["Max"] != \
            sides[1]["Distributed.all_reduce.0.forward"]["output"][0]["Max"]
    (tmp_path / "compare.json").write_text(json.dumps({"npu_path": npu, "bench_path": bench}))
    out = tmp_path / "out"
    assert main(["-f", "pytorch", "compare", "-i", str(tmp_path / "compare.json"), "-o", str(out), "-p", "2"]) == 0
    reports = sorted(name for name in os.listdir(out) if name.startswith("compare_result"))
    assert len(reports) == 8 and all(f"_step{s}_rank{r}-rank{r}_" in " ".join(reports)
                                     for s in (0, 1) for r in range(4))
    job = json.loads((out / "job_summary.json").read_text())
    assert job["pairs_compared"] == 8 and job["steps"] == [0, 1] and job["ranks"] == [0, 1, 2, 3]
    pairs = {(p["step"], p["rank"]): p for p in job["pairs"]}
    assert all(pairs[(0, r)]["suspect"] is None and pairs[(0, r)]["counts"]["suspicious"] == 0 for r in range(4))
    assert all(pairs[(1, r)]["suspect"] is not None for r in range(4))
    for rank in (0, 1, 3):
        assert pairs[(1, rank)]["suspect"]["call"] == "Distributed.all_reduce.0.forward"
    parted = job["parted"]
    assert (parted["step"], parted["rank"], parted["call"]) == (1, 2, "Tensor.__mul__.0.forward")
    assert parted["collectives_before"] == 0 and parted["report"].endswith(".xlsx")
    assert parted["report"] == pairs[(1, 2)]["report"] and os.path.isfile(parted["report"])


def test_identical_runs_do_not_part(two_runs, tmp_path):
    _, bench = two_runs
    (tmp_path / "compare.json").write_text(json.dumps({"npu_path": bench, "bench_path": bench}))
    out = tmp_path / "out"
    assert main(["-f", "mindspore", "compare", "-i", str(tmp_path / "compare.json"), "-o", str(out), "-p", "1"]) == 0
    job = json.loads((out / "job_summary.json").read_text())
    assert job["parted"] is None and job["pairs_compared"] == 8 and job["totals"]["suspicious"] == 0
