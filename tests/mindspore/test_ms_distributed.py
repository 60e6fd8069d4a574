"""Two MindSpore processes with their own RANK_ID write per-rank dump directories, and compare
makes one report per rank."""
import glob
import json
import os
import subprocess
import sys

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ms_rank_script.py")


def test_two_processes_write_rank_directories_and_compare_per_rank(tmp_path):
    from msprobe.cli import main
    dump_path = tmp_path / "dump"
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"task": "statistics", "level": "L1", "dump_path": str(dump_path)}))
    procs = [subprocess.Popen([sys.executable, SCRIPT, str(config)], env={**os.environ, "RANK_ID": str(rank)},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for rank in (0, 1)]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err[-2000:]
    for step in (0, 1):
        assert sorted(os.listdir(dump_path / f"step{step}")) == ["rank0", "rank1"]
    maxima = []
    for rank in (0, 1):
        with open(dump_path / "step0" / f"rank{rank}" / "dump.json") as handle:
            data = json.load(handle)["data"]
        maxima.append(data["Mint.mul.0.forward"]["output"][0]["Max"])
    assert maxima == [2.0, 4.0]  # each process dumped its own data
    compare_json = tmp_path / "compare.json"
    compare_json.write_text(json.dumps({"npu_path": str(dump_path / "step0"), "bench_path": str(dump_path / "step0")}))
    assert main(["-f", "mindspore", "compare", "-i", str(compare_json), "-o", str(tmp_path / "out")]) == 0
    reports = sorted(os.path.basename(p) for p in glob.glob(str(tmp_path / "out" / "compare_result_*.xlsx")))
    assert len(reports) == 2 and "rank0" in reports[0] and "rank1" in reports[1]
