"""run_ut / multi_run_ut options on real dumps: progress bar, -filter_api, -n, -d, -j, error_data_path,
and a multi_run_ut killed with SIGKILL (no worker left behind, resumed to the uninterrupted files)."""
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time

import pytest

from pt_run_ut_helpers import file_text, read_rows, report_paths, results_by_api, run_cli


def _cli(*argv, progress=False):
    env = dict(os.environ)
    env.pop("MSPROBE_NO_PROGRESS", None)
    if not progress:
        env["MSPROBE_NO_PROGRESS"] = "1"
    return subprocess.run([sys.executable, "-m", "msprobe.cli", "-f", "pytorch", *argv], env=env,
                          capture_output=True, text=True, timeout=300)


def test_progress_bar_counts_every_api_and_starts_at_the_resumed_count(bf16_statistics_dump, tmp_path):
    run = _cli("run_ut", "-api_info", bf16_statistics_dump, "-o", str(tmp_path / "full"), progress=True)
    assert run.returncode == 0, run.stderr
    assert re.search(r"run_ut: +100%\|.*\| 7/7 ", run.stderr), run.stderr
    quiet = _cli("run_ut", "-api_info", bf16_statistics_dump, "-o", str(tmp_path / "quiet"))
    assert quiet.returncode == 0 and "7/7" not in quiet.stderr

    full_result, full_details = report_paths(tmp_path / "full")
    cut = tmp_path / "cut"
    cut.mkdir()
    result = cut / os.path.basename(full_result)
    result.write_text("".join(file_text(full_result).splitlines(keepends=True)[:4]))     # 3 APIs done
    (cut / os.path.basename(full_details)).write_text(file_text(full_details))
    resumed = _cli("run_ut", "-api_info", bf16_statistics_dump, "-csv_path", str(result), progress=True)
    assert resumed.returncode == 0, resumed.stderr
    counts = re.findall(r"\| (\d)/7 ", resumed.stderr)
    assert counts[0] == "3" and counts[-1] == "7", resumed.stderr
    assert file_text(result) == file_text(full_result)


def test_filter_api_checks_only_the_first_of_calls_that_differ_in_statistics(long_dump, tmp_path):
    assert run_cli("run_ut", "-api_info", long_dump, "-o", str(tmp_path), "-f", "-j", "-d", "0") == 0
    names = [row["API name"] for row in read_rows(report_paths(tmp_path)[0])]
    # 120 iterations of matmul -> tanh -> mul -> add with the same shapes and arguments
    assert names == ["Torch.matmul.0", "Torch.tanh.0", "Tensor.__mul__.0", "Tensor.__add__.0"]  # 1.2.1 names


@pytest.mark.parametrize("workers", ["0", "65"])
def test_worker_count_outside_1_to_64_is_a_user_error(bf16_statistics_dump, tmp_path, workers, capsys):
    assert run_cli("multi_run_ut", "-api_info", bf16_statistics_dump, "-o", str(tmp_path), "-n", workers) == 1
    assert "-n must be between 1 and 64" in capsys.readouterr().out


def test_workers_share_the_devices_in_turn():
    from msprobe.core.run_ut.runner import device_plan

    assert device_plan([0, 1, 2, 3], 8) == [0, 1, 2, 3, 0, 1, 2, 3]
    assert device_plan([5], 3) == [5, 5, 5]
    assert device_plan([], 2) == [0, 0]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_run_ut_processes_reuse_freed_memory_instead_of_faulting_in_fresh_pages():
    # each API allocates and frees arrays of the same sizes again; without keep_freed_memory glibc maps large
    # blocks afresh every time (one page fault per 4 KB). The baseline holds glibc's default mmap threshold
    # (128 KB): left to itself glibc moves it up to the largest block freed so far, and the baseline then faulted
    # ~11,700 times a repetition standalone but never inside the full suite. Counted per repetition: with
    # keep_freed_memory the heap still grows in one or two repetitions of some runs (0 to 20,000 faults over 20),
    # but most fault in nothing
    script = ("import ctypes, json, resource, sys, torch\n"
              "from msprobe.core.run_ut.runner import keep_freed_memory\n"
              "if sys.argv[1] == '1':\n"
              "    assert keep_freed_memory()\n"
              "else:\n"
              "    assert ctypes.CDLL(None).mallopt(-3, 128 * 1024)  # M_MMAP_THRESHOLD, held\n"
              "def work():\n"
              "    tensors = [torch.ones(n) for n in (300_000, 700_000, 1_500_000, 3_000_000)]\n"
              "    return sum(float((t.double() * 2).sum()) for t in tensors)\n"
              "work()\n"
              "faults = []\n"
              "for _ in range(20):\n"
              "    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
              "    work()\n"
              "    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)\n"
              "print(json.dumps(faults))\n")
    faults = {flag: statistics.median(json.loads(subprocess.run(
        [sys.executable, "-c", script, flag], capture_output=True, text=True, check=True).stdout)) for flag in "01"}
    # 22 MB of float32 and 44 MB of float64 a repetition: ~26,900 faults each in the baseline, none with it
    assert faults["0"] > 20_000 and faults["1"] <= faults["0"] / 100, faults


def test_error_data_path_of_the_config_receives_the_failing_apis(bf16_statistics_dump, tmp_path, monkeypatch):
    import torch
    import torch.nn.functional as F

    exact = F.softmax

    def softmax(input, *args, **kwargs):        # bf16 softmax that loses half its mantissa
        out = exact(input, *args, **kwargs)
        return torch.round(out * 16) / 16 if input.dtype == torch.bfloat16 else out
    monkeypatch.setattr(F, "softmax", softmax)
    monkeypatch.setenv("MSPROBE_NO_PROGRESS", "1")
    errors = tmp_path / "errors"
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"task": "run_ut", "dump_path": "./",
                                  "run_ut": {"error_data_path": str(errors)}}))
    out = tmp_path / "out"
    assert run_cli("run_ut", "-api_info", bf16_statistics_dump, "-o", str(out), "-config", str(config),
                   "-save_error_data") == 0
    assert results_by_api(out)["Functional.softmax.0"]["Forward Test Success"] == "error"
    folders = os.listdir(errors)
    assert len(folders) == 1 and folders[0].startswith("ut_error_data")
    saved = sorted(os.listdir(errors / folders[0]))
    assert saved and all(name.startswith("Functional.softmax.0.forward.") for name in saved)
    assert not [name for name in os.listdir(out) if name.startswith("ut_error_data")]


def _rows_written(folder):
    paths = list(folder.glob("accuracy_checking_result_*.csv")) if folder.exists() else []
    if not paths:
        return 0
    with open(paths[0], encoding="utf-8") as handle:
        return max(0, handle.read().count("\n") - 1)


def _alive(pid):
    """Running or sleeping (a zombie waiting for its new parent to reap it has exited)."""
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8") as handle:
            state = next(line for line in handle if line.startswith("State:"))
    except (OSError, StopIteration):
        return False
    return "Z" not in state.split()[1]


def _children(pid):
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    return [int(child) for child in found]


def test_multi_run_ut_killed_with_sigkill_leaves_no_worker_and_resumes_to_the_same_files(long_dump, tmp_path):
    full, killed = tmp_path / "full", tmp_path / "killed"
    assert _cli("run_ut", "-api_info", long_dump, "-o", str(full)).returncode == 0
    full_result, full_details = report_paths(full)

    env = dict(os.environ, MSPROBE_NO_PROGRESS="1")
    proc = subprocess.Popen([sys.executable, "-m", "msprobe.cli", "-f", "pytorch", "multi_run_ut", "-api_info",
                             long_dump, "-o", str(killed), "-n", "2"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    workers, deadline = [], time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        workers = workers or _children(proc.pid)
        if _rows_written(killed) >= 40:
            workers = _children(proc.pid)
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.005)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "multi_run_ut finished before it could be killed"
    assert len(workers) == 2
    deadline = time.time() + 10
    while time.time() < deadline and any(_alive(pid) for pid in workers):
        time.sleep(0.1)
    assert not [pid for pid in workers if _alive(pid)], "orphaned multi_run_ut workers"

    result, details = report_paths(killed)
    assert 40 <= len(read_rows(result)) < len(read_rows(full_result))
    resumed = _cli("multi_run_ut", "-api_info", long_dump, "-csv_path", str(result), "-n", "2")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert report_paths(killed) == (result, details)
    assert file_text(result) == file_text(full_result)
    assert file_text(details) == file_text(full_details)


def test_multi_run_ut_on_a_truncated_dump_is_a_user_error(tmp_path, capsys):
    dump = tmp_path / "dump.json"
    dump.write_text('{"task": "statistics", "data": {"Torch.exp.0.forward": {')
    assert run_cli("multi_run_ut", "-api_info", str(dump), "-o", str(tmp_path), "-n", "2") == 1
    assert "is not valid JSON" in capsys.readouterr().out
    assert not list(tmp_path.glob("accuracy_checking_*.csv"))


def test_multi_run_ut_parent_leaves_torch_to_its_workers(bf16_statistics_dump, tmp_path):
    # the workers import torch in parallel while the parent reads dump.json; a parent that imported it
    # too would add its import and its slow interpreter exit to every multi_run_ut
    script = ("import sys; from msprobe.cli import main; "
              f"code = main(['-f', 'pytorch', 'multi_run_ut', '-api_info', {bf16_statistics_dump!r}, "
              f"'-o', {str(tmp_path)!r}, '-n', '2']); print('torch imported:', 'torch' in sys.modules); "
              "sys.exit(code)")
    run = subprocess.run([sys.executable, "-c", script], env=dict(os.environ, MSPROBE_NO_PROGRESS="1"),
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "torch imported: False" in run.stdout
    assert len(read_rows(report_paths(tmp_path)[0])) == 7
