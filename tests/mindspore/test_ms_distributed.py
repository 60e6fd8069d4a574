"""Two MindSpore processes with their own RANK_ID write per-rank dump directories, and compare
makes one report per rank."""
import glob
import json
import os
import subprocess
import sys

from ms_test_helpers import env_with_this_python, msrun_command
from tests.net import free_port

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
    # msprobe -f mindspore merge_result (1.2.1 has it): the chosen API's metric, one column per rank
    import openpyxl
    merge_config = tmp_path / "merge.yaml"
    merge_config.write_text("api:\n- Mint.mul\ncompare_index:\n- Max diff\n")
    assert main(["-f", "mindspore", "merge_result", "-i", str(tmp_path / "out"), "-o", str(tmp_path / "merged"),
                 "-config", str(merge_config)]) == 0
    [merged] = glob.glob(str(tmp_path / "merged" / "multi_ranks_compare_merge_*.xlsx"))
    rows = [[c.value for c in row] for row in openpyxl.load_workbook(merged)["Max diff"].iter_rows()]
    assert rows[0] == ["NPU Name", "rank0", "rank1"]
    assert {r[0] for r in rows[1:]} >= {"Mint.mul.0.forward.input.0", "Mint.mul.0.forward.output.0"}
    assert all(r[0].startswith("Mint.mul.") for r in rows[1:])
    tensors = [r for r in rows[1:] if r[0].endswith((".input.0", ".output.0"))]
    assert all(r[1:] == [0.0, 0.0] for r in tensors)  # each rank compared with itself



def test_msrun_job_dumps_per_rank_and_records_in_place_collectives(tmp_path):
    """A real msrun job (scheduler + 2 workers, CPU collectives): the rank comes from
    mindspore.communication, and mint.distributed.all_reduce, which works in place, is recorded with
    its input before and its result after the reduction."""
    dump_path = tmp_path / "dump"
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"task": "statistics", "level": "L1", "dump_path": str(dump_path)}))
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ms_msrun_script.py")
    # a `python` first on PATH that is not this interpreter (another venv, a system python without
    # mindspore) must not be the one that runs the workers
    wrong_bin = tmp_path / "wrong_bin"
    wrong_bin.mkdir()
    for name in ("python", "msrun"):
        (wrong_bin / name).write_text("#!/bin/sh\necho wrong interpreter >&2\nexit 3\n")
        (wrong_bin / name).chmod(0o755)
    env = env_with_this_python(tmp_path, {**os.environ, "PATH": f"{wrong_bin}{os.pathsep}{os.environ['PATH']}"})
    done = subprocess.run(msrun_command("--worker_num=2", "--local_worker_num=2", f"--master_port={free_port()}",
                                        f"--log_dir={tmp_path / 'logs'}", "--join=True", script, str(config)),
                          capture_output=True, text=True, timeout=240, env=env)
    logs = "".join(p.read_text() for p in (tmp_path / "logs").glob("worker_*.log"))
    assert done.returncode == 0, logs[-3000:]
    assert "rank 0: [[3.0, 3.0, 3.0], [3.0, 3.0, 3.0]]" in logs and "rank 1: [[3.0" in logs
    assert sorted(os.listdir(dump_path / "step0")) == ["rank0", "rank1"]
    for rank in (0, 1):
        with open(dump_path / "step0" / f"rank{rank}" / "dump.json") as handle:
            entry = json.load(handle)["data"]["Distributed.all_reduce.0.forward"]
        assert entry["input_args"][0]["Max"] == rank + 1
        assert entry["output"][0]["Max"] == 3.0 and entry["output"][0]["shape"] == [2, 3]


def test_msrun_workers_get_this_interpreter_and_its_environment(tmp_path):
    """msrun starts workers as `python` from PATH; in a virtual environment that is not activated, that `python`
    must still be this interpreter with this environment's packages (a symlink to a venv's python is not)."""
    import shutil

    env = env_with_this_python(tmp_path, {**os.environ, "PATH": "/usr/bin:/bin"})
    python = shutil.which("python", path=env["PATH"])
    done = subprocess.run([python, "-c", "import sys, mindspore; print(sys.prefix)"], capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == sys.prefix
