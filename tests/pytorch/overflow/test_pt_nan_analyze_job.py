"""nan_analyze on a real 4-process gloo job: rank 2 produces a NaN that an all_reduce spreads to all ranks."""
import json
import os
import subprocess
import sys

import pytest

from msprobe.cli import main
from tests.net import free_port

JOB = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "fixtures", "gloo_job.py")



def _run_job(root, task):
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, JOB, str(root), str(free_port()), task], capture_output=True,
                          text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return root / "dump"


@pytest.fixture(scope="module")
def statistics_job(tmp_path_factory):
    return _run_job(tmp_path_factory.mktemp("nanjob_stat"), "statistics")


def _report(out):
    files = [name for name in os.listdir(out) if name.startswith("nan_analyze_") and name.endswith(".json")]
    assert len(files) == 1
    return json.loads((out / files[0]).read_text())


def test_every_rank_sees_nan_but_rank2_produced_it(statistics_job, tmp_path, caplog):
    # the premise: after the all_reduce every rank holds NaN, and rank 0's first non-finite entry is the
    # all_reduce itself (a naive "lowest rank with a NaN" answer would be rank 0)
    for rank in range(4):
        data = json.loads((statistics_job / "step1" / f"rank{rank}" / "dump.json").read_text())["data"]
        out = data["Distributed.all_reduce.0.forward"]["output"][0]
        assert out["Max"] != out["Max"]
    step0 = json.loads((statistics_job / "step0" / "rank2" / "dump.json").read_text())["data"]
    assert step0["Torch.sqrt.0.forward"]["output"][0]["Max"] == step0["Torch.sqrt.0.forward"]["output"][0]["Max"]

    out = tmp_path / "out"
    assert main(["-f", "pytorch", "nan_analyze", "-i", str(statistics_job), "-o", str(out)]) == 0
    report = _report(out)
    origin = report["origin"]
    assert (origin["rank"], origin["step"], origin["call"], origin["role"]) == (2, 1, "Torch.sqrt.0.forward",
                                                                                 "producer")
    assert origin["kinds"] == ["nan"]
    assert "gloo_job.py" in origin["stack"] and "torch.sqrt" in origin["stack"]
    assert report["concurrent"] == [] and report["collective_overflow"] is False
    firsts = {(a["step"], a["rank"]): a for a in report["first_anomaly_by_rank"]}
    assert set(firsts) == {(1, 0), (1, 1), (1, 2), (1, 3)}
    for rank in (0, 1, 3):
        assert firsts[(1, rank)]["role"] == "received"
        assert firsts[(1, rank)]["call"] == "Distributed.all_reduce.0.forward"


def test_mindspore_command_reads_the_same_job(statistics_job, tmp_path):
    out = tmp_path / "out"
    assert main(["-f", "mindspore", "nan_analyze", "-i", str(statistics_job), "-o", str(out)]) == 0
    origin = _report(out)["origin"]
    assert (origin["rank"], origin["step"], origin["call"]) == (2, 1, "Torch.sqrt.0.forward")


def test_step0_alone_has_no_nan(statistics_job, tmp_path):
    out = tmp_path / "out"
    assert main(["-f", "pytorch", "nan_analyze", "-i", str(statistics_job / "step0"), "-o", str(out)]) == 0
    report = _report(out)
    assert report["origin"] is None and report["ranks"] == [0, 1, 2, 3]


def test_overflow_check_dump_of_the_same_job_names_rank2(tmp_path):
    dump = _run_job(tmp_path, "overflow_check")
    # overflow_check keeps only non-finite calls: step0 has none, step1 has the sqrt on rank 2 only
    assert not (dump / "step0").exists() or not any((dump / "step0").rglob("dump.json")) or all(
        not json.loads(p.read_text())["data"] for p in (dump / "step0").rglob("dump.json"))
    out = tmp_path / "out"
    assert main(["-f", "pytorch", "nan_analyze", "-i", str(dump), "-o", str(out)]) == 0
    origin = _report(out)["origin"]
    assert (origin["rank"], origin["step"], origin["call"], origin["role"]) == (2, 1, "Torch.sqrt.0.forward",
                                                                                 "producer")
