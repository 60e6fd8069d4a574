"""run_ut / multi_run_ut speed on a real L1 statistics dump of the GPT benchmark model; prints JSON lines.

usage: python benchmarks/run_ut_speed.py [--workers N] [--repeats R] [--keep DIR]
Dumps one training step of the model of /work/shared/bench/dump_overhead.py (imported from
benchmarks/dump_overhead.py: 4 blocks, d=256, seq 128, batch 8, AdamW) with msprobe's own
PrecisionDebugger (task statistics, level L1), then times `msprobe -f pytorch run_ut -api_info dump.json`
and `msprobe -f pytorch multi_run_ut ... -n N` (default N=2) in child processes, as a user runs them
(wall time, interpreter start-up, torch import and exit included). The two commands alternate R times
(default 3) and the fastest run of each counts (the run least disturbed by other processes).
Prints one JSON line per command with the APIs checked per second, then one with the multi/single
speed-up, whether all runs wrote identical CSVs, and the targets (>= 30 APIs/s; >= 1.6x with 2 workers).
"""
import argparse
import csv
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

TARGET_APIS_PER_SECOND = 30.0
TARGET_SPEEDUP = 1.6


def dump_one_step(dump_dir):
    """dump.json of one training step of the GPT model under PrecisionDebugger (statistics, L1)."""
    from dump_overhead import debugged_step

    config_path = os.path.join(os.path.dirname(dump_dir), "dump_config.json")
    with open(config_path, "w") as handle:
        json.dump({"task": "statistics", "dump_path": dump_dir, "level": "L1", "statistics": {}}, handle)
    debugged_step(config_path)
    paths = glob.glob(os.path.join(dump_dir, "step0", "rank*", "dump.json"))
    if not paths:
        sys.exit(f"no dump.json under {dump_dir}")
    return paths[0]


def _result_rows(out_dir):
    paths = sorted(glob.glob(os.path.join(out_dir, "accuracy_checking_result_*.csv")))
    details = sorted(glob.glob(os.path.join(out_dir, "accuracy_checking_details_*.csv")))
    if len(paths) != 1 or len(details) != 1:
        sys.exit(f"expected one result and one details CSV in {out_dir}, found {os.listdir(out_dir)}")
    with open(paths[0], newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    return rows, paths[0], details[0]


def _read(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def run_command(name, argv, out_dir):
    """(wall seconds, result CSV text, details CSV text) of one msprobe command in a child process."""
    env = dict(os.environ, MSPROBE_NO_PROGRESS="1")
    start = time.perf_counter()
    child = subprocess.run([sys.executable, "-m", "msprobe.cli", "-f", "pytorch", *argv, "-o", out_dir],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seconds = time.perf_counter() - start
    if child.returncode != 0:
        sys.exit(f"{name} failed (exit {child.returncode}):\n{child.stdout[-3000:]}")
    _, result, details = _result_rows(out_dir)
    texts = (_read(result), _read(details))
    shutil.rmtree(out_dir, ignore_errors=True)
    return seconds, texts


def report(name, seconds, result_text):
    """Print and return the JSON record of one command (its fastest run)."""
    rows = list(csv.DictReader(result_text.splitlines()))
    counts = {status: sum(1 for row in rows if row["Forward Test Success"] == status)
              for status in ("pass", "warning", "error", "SKIP")}
    best = min(seconds)
    record = {"benchmark": "run_ut_speed", "command": name, "apis": len(rows),
              "apis_run": len(rows) - counts["SKIP"], "forward_status_counts": counts, "seconds": round(best, 2),
              "all_seconds": [round(s, 2) for s in seconds], "apis_per_second": round(len(rows) / best, 1),
              "target_apis_per_second": TARGET_APIS_PER_SECOND, "cpus": os.cpu_count(),
              "load_average_1min": round(os.getloadavg()[0], 2)}
    print(json.dumps(record), flush=True)
    return record


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2, help="multi_run_ut -n (default 2)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each command, alternating (default 3)")
    parser.add_argument("--keep", default="", help="keep the dump in this directory")
    args = parser.parse_args()
    work = args.keep or tempfile.mkdtemp(prefix="msprobe_run_ut_bench_")
    os.makedirs(work, exist_ok=True)
    try:
        dump_json = dump_one_step(os.path.join(work, "dump"))
        multi_name = f"multi_run_ut -n {args.workers}"
        commands = {"run_ut": ["run_ut", "-api_info", dump_json],
                    multi_name: ["multi_run_ut", "-api_info", dump_json, "-n", str(args.workers)]}
        seconds, outputs = {name: [] for name in commands}, set()
        for repeat in range(args.repeats):
            for name, argv in commands.items():
                took, texts = run_command(name, argv, os.path.join(work, f"out_{repeat}"))
                seconds[name].append(took)
                outputs.add(texts)
        single = report("run_ut", seconds["run_ut"], next(iter(outputs))[0])
        multi = report(multi_name, seconds[multi_name], next(iter(outputs))[0])
        identical = len(outputs) == 1
        speedup = single["seconds"] / multi["seconds"]
        print(json.dumps({"benchmark": "run_ut_speed", "summary": True, "apis": single["apis"],
                          "run_ut_apis_per_second": single["apis_per_second"],
                          "multi_run_ut_apis_per_second": multi["apis_per_second"], "workers": args.workers,
                          "speedup": round(speedup, 2), "target_speedup": TARGET_SPEEDUP,
                          "meets_apis_per_second": single["apis_per_second"] >= TARGET_APIS_PER_SECOND,
                          "meets_speedup": speedup >= TARGET_SPEEDUP, "identical_reports": identical,
                          "repeats": args.repeats}), flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
