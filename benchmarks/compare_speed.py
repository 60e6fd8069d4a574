"""Compare speed on two fixtures made from real dumps of the GPT benchmark model; prints JSON lines.

usage: python benchmarks/compare_speed.py [--only statistics|tensor] [--cache DIR]
Two fixtures; each is compared via the CLI and via the core API (see measure()).
(1) statistics mode: a real L1 statistics dump (579 entries) replicated 50x by
    /work/shared/bench/make_compare_fixture.py -> 28,950 entries per side (NPU jittered by 1%).
(2) tensor mode: a real L1 tensor dump of the GPT model, step 3 against step 4.
Fixtures are cached under --cache (default /tmp/msprobe_compare_bench). Each compare runs as
`msprobe -f pytorch compare` in a child process; wall time and the child's peak RSS are reported
with the reference's numbers (73 s / 1.2 GB and 16.9 s / 360 MB) for the ratio.
"""
import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time

BENCH = os.environ.get("MSPROBE_BENCH_DIR", "/work/shared/bench")
REFERENCE = {"statistics": {"seconds": 73.0, "rss_mb": 1200}, "tensor": {"seconds": 16.9, "rss_mb": 360}}


def _run(cmd, env=None):
    result = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if result.returncode != 0:
        sys.exit(f"command failed: {' '.join(cmd)}\n{result.stdout[-3000:]}")
    return result.stdout


def _dump_gpt(out_dir, task, steps):
    os.makedirs(os.path.dirname(out_dir), exist_ok=True)
    if glob.glob(os.path.join(out_dir, f"step{steps - 1}", "rank*", "dump.json")):
        return out_dir
    env = dict(os.environ, DUMP_DIR=out_dir, STEPS=str(steps))
    _run([sys.executable, os.path.join(BENCH, "dump_overhead.py"), "tool", task, "L1"], env=env)
    return out_dir


def statistics_fixture(cache):
    npu, bench = os.path.join(cache, "stat_npu", "dump.json"), os.path.join(cache, "stat_bench", "dump.json")
    if not (os.path.isfile(npu) and os.path.isfile(bench)):
        source = glob.glob(os.path.join(_dump_gpt(os.path.join(cache, "gpt_statistics"), "statistics", 3),
                                        "step1", "rank*", "dump.json"))[0]
        for path, jitter in ((npu, "0.01"), (bench, "0.0")):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            _run([sys.executable, os.path.join(BENCH, "make_compare_fixture.py"), source, path, "50", jitter])
    return npu, bench


def tensor_fixture(cache):
    root = _dump_gpt(os.path.join(cache, "gpt_tensor"), "tensor", 5)
    npu = glob.glob(os.path.join(root, "step3", "rank*", "dump.json"))[0]
    bench = glob.glob(os.path.join(root, "step4", "rank*", "dump.json"))[0]
    return npu, bench


def _tensor_bytes(dump_json):
    return sum(os.path.getsize(p) for p in glob.glob(os.path.join(os.path.dirname(dump_json), "dump_tensor_data", "*")))


_CORE_SCRIPT = ("import sys; from msprobe.core.compare import CompareOptions, compare_dumps; "
                "compare_dumps(sys.argv[1], sys.argv[2], sys.argv[3], CompareOptions())")


def _timed_child(cmd):
    """(seconds, peak RSS in KB, CPU seconds, output) of one child process (and the workers it reaped)."""
    start = time.perf_counter()
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"command failed: {' '.join(cmd)}\n{output[-3000:]}")
    return seconds, usage.ru_maxrss, usage.ru_utime + usage.ru_stime, output


def measure(name, npu, bench, cache, via="cli"):
    """via='cli': `msprobe -f pytorch compare` as a user runs it (argument parsing and the console
    script's start included; torch is not imported); via='core': msprobe.core.compare.compare_dumps
    in a bare python (the compare work alone)."""
    out = os.path.join(cache, f"out_{name}_{via}")
    shutil.rmtree(out, ignore_errors=True)
    config = os.path.join(cache, f"compare_{name}.json")
    with open(config, "w") as handle:
        json.dump({"npu_path": npu, "bench_path": bench}, handle)
    if via == "cli":
        cmd = ["msprobe", "-f", "pytorch", "compare", "-i", config, "-o", out]
    else:
        cmd = [sys.executable, "-c", _CORE_SCRIPT, npu, bench, out]
    seconds, peak_kb, cpu_seconds, log = _timed_child(cmd)
    with open(npu) as handle:
        entries = len(json.load(handle)["data"])
    found = re.search(r"\): (\d+) rows", log)  # the summary line "compare (... mode): N rows, ..."
    rows = int(found.group(1)) if found else "?"
    ref = REFERENCE[name]
    record = {"benchmark": f"compare_{name}", "via": via, "entries_per_side": entries, "rows": rows,
              "seconds": round(seconds, 2), "cpu_seconds": round(cpu_seconds, 2), "peak_rss_mb": round(peak_kb / 1024, 1),
              "reference_seconds": ref["seconds"], "reference_rss_mb": ref["rss_mb"],
              "speedup_vs_reference": round(ref["seconds"] / seconds, 1), "cpus": os.cpu_count(),
              "load_average_1min": round(os.getloadavg()[0], 2)}
    if name == "tensor":
        record["tensor_mb_per_side"] = round(_tensor_bytes(npu) / 2 ** 20, 1)
    print(json.dumps(record), flush=True)
    return record


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("statistics", "tensor"))
    parser.add_argument("--cache", default="/tmp/msprobe_compare_bench")
    args = parser.parse_args()
    os.makedirs(args.cache, exist_ok=True)
    if args.only in (None, "statistics"):
        for via in ("cli", "core"):
            measure("statistics", *statistics_fixture(args.cache), args.cache, via)
    if args.only in (None, "tensor"):
        for via in ("cli", "core"):
            measure("tensor", *tensor_fixture(args.cache), args.cache, via)


if __name__ == "__main__":
    main()
