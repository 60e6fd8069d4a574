"""Online run_ut throughput over loopback TCP against offline run_ut on the same calls; prints JSON lines.

usage: python benchmarks/online_run_ut_speed.py [--repeats R]
One training step of the GPT benchmark model (benchmarks/dump_overhead.py: 4 blocks, d=256, seq 128,
batch 8, AdamW; level L1) is run twice in child processes: once under PrecisionDebugger with task tensor
(the offline dump), once with task tensor + online_run_ut streaming to a bench side
(`msprobe -f pytorch run_ut -config` with run_ut.is_online, started first and waiting) on 127.0.0.1.
Offline: calls / wall time of `msprobe -f pytorch run_ut -api_info dump.json` (start-up, torch import and
exit included, as a user runs it). Online: calls / the bench's busy time (decoding cases, re-running them,
writing rows; its start-up happens before training, and the time it waits for training to send the next
call is not counted; the span from the first message to the last row is printed too). Target: online >= 0.8x offline.
The fastest of R runs (default 2) of each counts.
"""
import argparse
import glob
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TARGET_RATIO = 0.8
ENV = dict(os.environ, MSPROBE_NO_PROGRESS="1")

TRAIN = r'''
import sys
sys.path.insert(0, {here!r})
from dump_overhead import debugged_step
debugged_step({config!r})
'''


def _write(path, value):
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(value, handle)
    return path


def _train(config):
    subprocess.run([sys.executable, "-c", TRAIN.format(here=HERE, config=config)], check=True, env=ENV,
                   capture_output=True, timeout=600)


def offline(work):
    config = _write(os.path.join(work, "offline.json"), {"task": "tensor", "dump_path": os.path.join(work, "dump"),
                                                         "level": "L1"})
    _train(config)
    dump_json = glob.glob(os.path.join(work, "dump", "step0", "rank*", "dump.json"))[0]
    with open(dump_json, encoding="utf-8") as handle:
        calls = sum(1 for name in json.load(handle)["data"] if name.endswith(".forward"))
    best = None
    for run in range(ARGS.repeats):
        out = os.path.join(work, f"offline_out{run}")
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "msprobe.cli", "-f", "pytorch", "run_ut", "-api_info", dump_json,
                        "-o", out], check=True, env=ENV, capture_output=True, timeout=600)
        elapsed = time.perf_counter() - start
        best = elapsed if best is None else min(best, elapsed)
    return calls, best


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def online(work, run):
    port = _free_port()
    bench_cfg = _write(os.path.join(work, f"bench{run}.json"),
                       {"task": "run_ut", "run_ut": {"is_online": True, "host": "127.0.0.1", "port": port,
                                                     "tls_path": ""}})
    device_cfg = _write(os.path.join(work, f"device{run}.json"),
                        {"task": "tensor", "dump_path": os.path.join(work, "unused"), "level": "L1",
                         "tensor": {"online_run_ut": True, "host": "127.0.0.1", "port": port, "tls_path": ""}})
    log_path = os.path.join(work, f"bench{run}.log")
    with open(log_path, "w", encoding="utf-8") as log:
        bench = subprocess.Popen([sys.executable, "-m", "msprobe.cli", "-f", "pytorch", "run_ut", "-config",
                                  bench_cfg, "-o", os.path.join(work, f"online_out{run}")], stdout=log,
                                 stderr=subprocess.STDOUT, env=ENV)
        try:
            while "waiting for ranks" not in open(log_path, encoding="utf-8").read():
                if bench.poll() is not None:
                    sys.exit(open(log_path, encoding="utf-8").read())
                time.sleep(0.05)
            _train(device_cfg)
            bench.wait(timeout=600)
        finally:
            if bench.poll() is None:
                bench.kill()
                bench.wait()
    text = open(log_path, encoding="utf-8").read()
    match = re.search(r"(\d+) calls checked in ([\d.]+) s from the first message, ([\d.]+) s of them busy", text)
    return int(match.group(1)), float(match.group(3)), float(match.group(2))


def main():
    with tempfile.TemporaryDirectory(prefix="msprobe_online_bench_") as work:
        calls, offline_s = offline(work)
        runs = [online(work, run) for run in range(ARGS.repeats)]
        online_calls, online_s, online_span = min(runs, key=lambda item: item[1])
    offline_rate, online_rate = calls / offline_s, online_calls / online_s
    print(json.dumps({"mode": "offline run_ut (whole command)", "calls": calls, "seconds": round(offline_s, 3),
                      "calls_per_s": round(offline_rate, 1)}))
    print(json.dumps({"mode": "online run_ut (loopback TCP, bench busy time)", "calls": online_calls,
                      "seconds": round(online_s, 3), "calls_per_s": round(online_rate, 1),
                      "first_message_to_done_s": round(online_span, 3)}))
    print(json.dumps({"ratio": round(online_rate / offline_rate, 3), "target": TARGET_RATIO,
                      "met": online_rate / offline_rate >= TARGET_RATIO, "same_calls": calls == online_calls}))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    ARGS = parser.parse_args()
    main()
