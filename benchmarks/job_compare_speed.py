"""Whole-job compare speed: N ranks x 1 step of the GPT benchmark's statistics dump; prints JSON lines.

usage: python benchmarks/job_compare_speed.py [--ranks 64 256 1024] [--processes P] [--cache DIR] [--src RANK_DIR]
The source is a real L1 statistics dump of the GPT benchmark model (578 entries; made once with
/work/shared/bench/dump_overhead.py, or given with --src). benchmarks/make_job_tree.py replicates it into
N ranks (NPU side jittered by 1e-8, below float32 rounding, one fault at the last rank so the job parts there). Each size is
compared by `msprobe -f pytorch compare` in a child process, every per-pair report written; reported: wall
time, seconds per rank, CPU seconds of the child and all its workers (user + system: on a loaded machine the
steadier figure; CPU seconds / cores is the wall time of an otherwise idle machine), and the peak of the summed
RSS of the child and all its workers (sampled every 50 ms).
Targets (issue 22): 1,024 ranks in <= 20 s, peak RSS <= 1 GB, time linear in ranks.
"""
import argparse
import glob
import json
import os
import resource
import shutil
import subprocess
import sys
import time

import psutil

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_job_tree import make_tree  # noqa: E402

BENCH = os.environ.get("MSPROBE_BENCH_DIR", "/work/shared/bench")


def source_dump(cache):
    found = glob.glob(os.path.join(cache, "gpt_statistics", "step1", "rank*", "dump.json"))
    if not found:
        os.makedirs(cache, exist_ok=True)  # dump_overhead.py writes its config beside DUMP_DIR
        env = dict(os.environ, DUMP_DIR=os.path.join(cache, "gpt_statistics"), STEPS="3")
        subprocess.run([sys.executable, os.path.join(BENCH, "dump_overhead.py"), "tool", "statistics", "L1"],
                       env=env, check=True, stdout=subprocess.DEVNULL)
        found = glob.glob(os.path.join(cache, "gpt_statistics", "step1", "rank*", "dump.json"))
    return os.path.dirname(found[0])


def _tree_rss(proc):
    total = 0
    for member in [proc] + proc.children(recursive=True):
        try:
            total += member.memory_info().rss
        except psutil.Error:
            pass
    return total


def measure(compare_json, out, processes):
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "msprobe.cli", "-f", "pytorch", "compare", "-i", compare_json, "-o", out]
    if processes:
        cmd += ["-p", str(processes)]
    os.makedirs(out, exist_ok=True)
    log_path = os.path.join(out, "compare.log")
    log = open(log_path, "w", encoding="utf-8")  # a file, not a pipe: a full pipe would block the child
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.time()
    child = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True)
    watched, peak = psutil.Process(child.pid), 0
    while child.poll() is None:
        try:
            peak = max(peak, _tree_rss(watched))
        except psutil.Error:
            pass
        time.sleep(0.05)
    seconds = time.time() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the child and every worker it waited for
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    log.close()
    if child.returncode != 0:
        with open(log_path, encoding="utf-8") as handle:
            sys.exit(f"compare failed: {handle.read()[-2000:]}")
    with open(os.path.join(out, "job_summary.json"), encoding="utf-8") as handle:
        job = json.load(handle)
    reports = len(glob.glob(os.path.join(out, "compare_result_*.xlsx")))
    return seconds, cpu, peak, job, reports


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[64, 256, 1024])
    parser.add_argument("--processes", type=int, default=None)
    parser.add_argument("--cache", default="/tmp/msprobe_job_bench")
    parser.add_argument("--src", default=None, help="a rank folder with a statistics dump.json")
    args = parser.parse_args()
    src = args.src or source_dump(args.cache)
    for ranks in args.ranks:
        root = os.path.join(args.cache, f"job_{ranks}")
        if not os.path.isfile(os.path.join(root, "compare.json")):
            with open(os.path.join(src, "dump.json"), encoding="utf-8") as handle:
                last_call = list(json.load(handle)["data"])[-1]
            make_tree(src, root, ranks, faults=[(ranks - 1, 0, last_call, 1.5)])
        seconds, cpu, peak, job, reports = measure(os.path.join(root, "compare.json"), os.path.join(root, "out"),
                                              args.processes)
        print(json.dumps({"bench": "job_compare", "ranks": ranks, "seconds": round(seconds, 2),
                          "seconds_per_rank": round(seconds / ranks, 4), "cpu_seconds": round(cpu, 2),
                          "cpu_ms_per_rank": round(1000 * cpu / ranks, 1), "peak_rss_mb": round(peak / 2 ** 20),
                          "reports": reports, "parted": job["parted"] and [job["parted"]["rank"],
                                                                           job["parted"]["call"]],
                          "cpu_count": os.cpu_count(), "load_avg_1m": round(os.getloadavg()[0], 1)}), flush=True)


if __name__ == "__main__":
    main()
