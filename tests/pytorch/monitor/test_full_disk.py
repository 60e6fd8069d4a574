"""A full disk under TrainerMon and grad_probe: a real ENOSPC (a small tmpfs, filled up before step 2, in a
mount namespace of its own) never reaches training. Each kind of failure is logged once per step, a last line
says what was not written, the loss curve is that of a run without the tool, and the files written before the
disk filled up stay whole."""
import json
import os
import re
import subprocess
import sys

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "full_disk_script.py")
FILL_AT, STEPS = 2, 6


def _run_on_full_disk(tmp_path, tool):
    mount = tmp_path / "disk"
    mount.mkdir()
    command = ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
               'mount -t tmpfs -o size=1m tmpfs "$1" && exec "$2" "$3" "$4" "$1" "$5"', "sh",
               str(mount), sys.executable, SCRIPT, tool, str(tmp_path)]
    env = dict(os.environ, MSPROBE_LOG_LEVEL="1")
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    values = dict(line.split(" ", 1) for line in result.stdout.splitlines()
                  if line.startswith(("LOSSES ", "REFERENCE ", "STEP")))
    assert json.loads(values["LOSSES"]) == json.loads(values["REFERENCE"])  # training went on, untouched
    return [line for line in out.splitlines() if line.startswith("[ERROR]")], values


def _check_error_lines(errors, component, kinds):
    failures = [re.search(r"cannot write (.+) of step (\d+) \((.+?):", line) for line in errors]
    reports = [line for line in errors if f"{component}: not written:" in line]
    assert len(reports) == 1 and errors[-1] == reports[0], errors
    failures = [found.groups() for found in failures if found]
    assert len(failures) == len(errors) - 1, errors  # nothing else is an error line
    assert len(set(failures)) == len(failures), errors  # once per kind and step
    assert {reason for _, _, reason in failures} == {"No space left on device"}
    assert {what for what, _, _ in failures} <= kinds, failures
    assert {int(step) for _, step, _ in failures} >= set(range(FILL_AT, STEPS)), failures
    return failures


def test_trainer_mon_on_a_full_disk_logs_and_training_goes_on(tmp_path):
    errors, values = _run_on_full_disk(tmp_path, "monitor")
    _check_error_lines(errors, "msprobe monitor", {"statistics files", "global metrics", "plots"})
    assert "statistics files" in errors[-1]
    # what was written before the disk filled up is whole: one gradient row per parameter for steps 0 and 1
    params = ["0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"]
    assert [json.loads(values[f"STEP{step}_ROWS"]) for step in range(FILL_AT)] == [params] * FILL_AT


def test_grad_probe_on_a_full_disk_logs_and_stop_returns(tmp_path):
    errors, _ = _run_on_full_disk(tmp_path, "grad_probe")
    failures = _check_error_lines(errors, "msprobe grad_probe", {"summary files", "direction folders", "index file"})
    assert ("index file", str(STEPS), "No space left on device") in failures
