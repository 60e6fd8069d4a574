"""Processes of the online run_ut tests: the bench side (`msprobe -f pytorch run_ut -config`), the device
side (online_run_ut_train.py) and offline run_ut on a tensor dump of the same calls. Loopback only, every
process waited for with a time limit and killed in the end."""
import csv
import glob
import json
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.join(HERE, "online_run_ut_train.py")
ENV = dict(os.environ, MSPROBE_NO_PROGRESS="1", OMP_NUM_THREADS="1")



def write_json(path, value):
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(value, handle)
    return str(path)


def device_config(tmp, **tensor):
    return write_json(tmp / "device.json", {"task": "tensor", "dump_path": str(tmp / "unused_dump"), "rank": [0],
                                            "step": [0], "level": "L1", "tensor": {"online_run_ut": True, **tensor}})


def bench_config(tmp, **run_ut):
    return write_json(tmp / "bench.json", {"task": "run_ut", "run_ut": {"is_online": True, **run_ut}})


class Bench:
    """The bench side as a child process; `wait_ready()` until it listens, `stop()` always."""

    def __init__(self, config, out_dir):
        self.log_path = f"{out_dir}.log"
        self.log = open(self.log_path, "w", encoding="utf-8")
        self.proc = subprocess.Popen([sys.executable, "-m", "msprobe.cli", "-f", "pytorch", "run_ut", "-config",
                                      config, "-o", str(out_dir)], stdout=self.log, stderr=subprocess.STDOUT,
                                     env=ENV)

    def text(self):
        with open(self.log_path, encoding="utf-8") as handle:
            return handle.read()

    def wait_ready(self, timeout=60):
        end = time.monotonic() + timeout
        while "waiting for ranks" not in self.text():
            assert self.proc.poll() is None, self.text()
            assert time.monotonic() < end, self.text()
            time.sleep(0.05)

    def wait_exit(self, timeout=60):
        return self.proc.wait(timeout=timeout)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def run_device(config, steps=1, timeout=120, cwd=None):
    """(parsed JSON line, stderr text) of one training run."""
    done = subprocess.run([sys.executable, TRAIN, config, str(steps)], capture_output=True, text=True,
                          timeout=timeout, env=ENV, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return parse_losses(done.stdout), done.stdout + done.stderr


def parse_losses(stdout):
    """The JSON line of online_run_ut_train.py (msprobe's log lines share its stdout)."""
    line, = [line for line in stdout.splitlines() if line.startswith('{"losses"')]
    return json.loads(line)


def offline_run_ut(tmp):
    """(result rows, details rows, details path) of offline run_ut on a tensor dump of step 0."""
    config = write_json(tmp / "offline_dump.json", {"task": "tensor", "dump_path": str(tmp / "dump"), "step": [0],
                                                    "level": "L1"})
    run_device(config)
    out = tmp / "offline"
    subprocess.run([sys.executable, "-m", "msprobe.cli", "-f", "pytorch", "run_ut", "-api_info",
                    str(tmp / "dump" / "step0" / "rank" / "dump.json"), "-o", str(out)], check=True, env=ENV,
                   capture_output=True, timeout=120)
    return csv_pair(out, "")


def csv_pair(folder, suffix):
    """Rows of accuracy_checking_result/details_*{suffix}.csv in `folder` and the details path."""
    result, = glob.glob(os.path.join(folder, f"accuracy_checking_result_*{suffix}.csv"))
    details, = glob.glob(os.path.join(folder, f"accuracy_checking_details_*{suffix}.csv"))
    return read_rows(result), read_rows(details), details


def read_rows(path):
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))
