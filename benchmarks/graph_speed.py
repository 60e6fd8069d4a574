"""Graph speed: `msprobe -f pytorch graph` on a 200-layer model (~3,200 nodes), and the HTML viewer opening a
~10,000-node graph in headless Chromium; prints JSON lines.

usage: python benchmarks/graph_speed.py [--cache DIR] [--pairs 400] [--viewer-pairs 1260]
Each (Linear, ReLU) pair gives 8 nodes in a statistics mix dump of one forward+backward step (module + API,
forward + backward). 1.2.1's 3,203-node figure for 200 pairs counts its Tensor.view_as hook artefacts (16
nodes a pair); our dumps have none, so 400 pairs make the same ~3,200-node graph.
The model is dumped twice (the second run with one weight scaled); build and compare run as CLI child
processes: wall time and the child's peak RSS are
reported next to 1.2.1's figures on this machine (build ~2 s + ~11 s start-up, compare ~8 s + ~11 s).
The viewer figures are the page's ready time (navigation start to first render, `data-ready-ms`), the
viewer script's share (`data-script-ms`) and the
wall time of `chromium --headless --dump-dom` for the file.
"""
import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

REFERENCE_121 = {"build": 13.0, "compare": 19.0}  # seconds, CLI wall time incl. start-up (spec measurements)


def _dump(directory, layers, scale):
    """One training step of `layers` x (Linear, ReLU) under PrecisionDebugger (statistics, mix)."""
    if glob.glob(os.path.join(directory, "dump", "step0", "rank", "dump.json")):
        return os.path.join(directory, "dump", "step0", "rank")
    code = f"""
import json, os, torch
from msprobe.pytorch import PrecisionDebugger
torch.manual_seed(0)
model = torch.nn.Sequential(*[m for _ in range({layers}) for m in (torch.nn.Linear(16, 16), torch.nn.ReLU())])
with torch.no_grad():
    model[{layers}].weight.mul_({scale})  # the middle Linear: the injected fault
os.makedirs({directory!r}, exist_ok=True)
config = os.path.join({directory!r}, "config.json")
json.dump({{"task": "statistics", "level": "mix", "dump_path": os.path.join({directory!r}, "dump")}}, open(config, "w"))
debugger = PrecisionDebugger(config_path=config, model=model)
debugger.start()
model(torch.randn(4, 16, generator=torch.Generator().manual_seed(1))).pow(2).mean().backward()
debugger.stop(); debugger.step(); debugger.close()
"""
    subprocess.run([sys.executable, "-c", code], check=True, stdout=subprocess.DEVNULL)
    return os.path.join(directory, "dump", "step0", "rank")


def _cli(args):
    """(wall seconds, peak RSS MB of this child alone) of one `msprobe` run."""
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-m", "msprobe.cli", *args], stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        sys.exit(f"msprobe {' '.join(args)} failed with {child.returncode}")
    return wall, usage.ru_maxrss / 1024


def _graph(work, name, npu, bench=None, extra=()):
    content = {"npu_path": npu, "is_print_compare_log": False}
    if bench:
        content["bench_path"] = bench
    input_json = os.path.join(work, f"{name}.json")
    with open(input_json, "w") as handle:
        json.dump(content, handle)
    out = os.path.join(work, f"out_{name}")
    shutil.rmtree(out, ignore_errors=True)
    wall, rss = _cli(["-f", "pytorch", "graph", "-i", input_json, "-o", out, *extra])
    files = glob.glob(os.path.join(out, "*.vis")) + glob.glob(os.path.join(out, "*.html"))
    nodes = len(json.load(open(glob.glob(os.path.join(out, "*.vis"))[0])).get("NPU", {}).get("node", {})) or None
    return wall, rss, files, nodes


def _viewer(html):
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    profile = tempfile.mkdtemp(prefix="graph_speed_chromium_")
    try:
        start = time.perf_counter()
        dom = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                              "--no-first-run", "--disable-background-networking", "--disable-component-update",
                              "--disable-sync", f"--user-data-dir={profile}", "--dump-dom", "file://" + html],
                             capture_output=True, text=True, timeout=120).stdout
        wall = time.perf_counter() - start
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    ready = re.search(r'data-ready-ms="(\d+)"', dom)
    script = re.search(r'data-script-ms="(\d+)"', dom)
    return wall, int(ready.group(1)) if ready else None, int(script.group(1)) if script else None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cache", default="/tmp/msprobe_graph_bench")
    parser.add_argument("--pairs", type=int, default=400)
    parser.add_argument("--viewer-pairs", type=int, default=1260)
    args = parser.parse_args()
    os.makedirs(args.cache, exist_ok=True)
    npu = _dump(os.path.join(args.cache, f"npu{args.pairs}"), args.pairs, 8.0)
    bench = _dump(os.path.join(args.cache, f"bench{args.pairs}"), args.pairs, 1.0)
    wall, rss, files, _ = _graph(args.cache, "build", npu)
    print(json.dumps({"case": f"build {args.pairs} pairs", "seconds": round(wall, 2), "peak_rss_mb": round(rss),
                      "vis_mb": round(os.path.getsize(files[0]) / 2 ** 20, 1),
                      "speedup_vs_1.2.1": round(REFERENCE_121["build"] / wall, 1)}))
    wall, rss, files, nodes = _graph(args.cache, "compare", npu, bench)
    print(json.dumps({"case": f"compare {args.pairs} pairs", "nodes": nodes, "seconds": round(wall, 2),
                      "peak_rss_mb": round(rss), "vis_mb": round(os.path.getsize(files[0]) / 2 ** 20, 1),
                      "speedup_vs_1.2.1": round(REFERENCE_121["compare"] / wall, 1)}))
    big_npu = _dump(os.path.join(args.cache, f"npu{args.viewer_pairs}"), args.viewer_pairs, 8.0)
    big_bench = _dump(os.path.join(args.cache, f"bench{args.viewer_pairs}"), args.viewer_pairs, 1.0)
    wall, rss, files, nodes = _graph(args.cache, "viewer", big_npu, big_bench, ("--html",))
    html = [f for f in files if f.endswith(".html")][0]
    open_wall, ready_ms, script_ms = _viewer(html)
    print(json.dumps({"case": f"html viewer {args.viewer_pairs} pairs", "nodes": nodes,
                      "compare_seconds": round(wall, 2), "html_mb": round(os.path.getsize(html) / 2 ** 20, 1),
                      "page_ready_ms": ready_ms, "viewer_script_ms": script_ms,
                      "chromium_dump_dom_seconds": round(open_wall, 2)}))


if __name__ == "__main__":
    main()
