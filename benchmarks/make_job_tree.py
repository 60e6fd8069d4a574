"""Make a synthetic whole-job compare input from one real dump: N ranks x S steps, jitter, optional faults.

usage: python benchmarks/make_job_tree.py SRC_RANK_DIR OUT_ROOT --ranks N [--steps S] [--jitter J (default 1e-8)]
           [--fault RANK:STEP:CALL[:FACTOR]] ...

SRC_RANK_DIR holds a real dump.json (and stack.json / construct.json). OUT_ROOT gets
  bench/step{s}/rank{r}/   the source files as they are (hard links: one copy on disk)
  npu/step{s}/rank{r}/     dump.json with every float tensor's Max/Min/Mean/Norm multiplied by (1 + uniform(-J, J)),
                           seeded by (step, rank), so reruns give the same tree; stack/construct linked
  compare.json             {"npu_path": OUT_ROOT/npu, "bench_path": OUT_ROOT/bench}
A fault multiplies the output statistics of CALL (a dump.json entry name) on that rank and step by
FACTOR (default 1.5) on the NPU side only: the job parts there. Prints one JSON line with what it made.
"""
import argparse
import json
import os
import random
import shutil
import sys
import time

STATS = ("Max", "Min", "Mean", "Norm")


def _scaled(node, factor_of):
    if isinstance(node, dict):
        if any(word in str(node.get("dtype", "")) for word in ("int", "bool")):
            return node  # integer statistics stay exact, as a real run keeps them
        return {k: (v * factor_of() if k in STATS and isinstance(v, float) else _scaled(v, factor_of))
                for k, v in node.items()}
    if isinstance(node, list):
        return [_scaled(item, factor_of) for item in node]
    return node


def _fault(text):
    parts = text.split(":")
    if len(parts) not in (3, 4):
        raise argparse.ArgumentTypeError(f"--fault takes RANK:STEP:CALL[:FACTOR], got {text!r}")
    return int(parts[0]), int(parts[1]), parts[2], float(parts[3]) if len(parts) == 4 else 1.5


def _link(src, dst):
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def make_tree(src_dir, out_root, ranks, steps=1, jitter=1e-8, faults=()):
    with open(os.path.join(src_dir, "dump.json"), encoding="utf-8") as handle:
        dump = json.load(handle)
    extras = [name for name in ("stack.json", "construct.json") if os.path.isfile(os.path.join(src_dir, name))]
    faults = {(rank, step): (call, factor) for rank, step, call, factor in faults}
    for step in range(steps):
        for rank in range(ranks):
            bench_dir = os.path.join(out_root, "bench", f"step{step}", f"rank{rank}")
            npu_dir = os.path.join(out_root, "npu", f"step{step}", f"rank{rank}")
            os.makedirs(bench_dir, exist_ok=True)
            os.makedirs(npu_dir, exist_ok=True)
            for name in ["dump.json"] + extras:
                _link(os.path.join(src_dir, name), os.path.join(bench_dir, name))
            for name in extras:
                _link(os.path.join(src_dir, name), os.path.join(npu_dir, name))
            rng = random.Random(step * 1_000_003 + rank)
            data = _scaled(dump["data"], lambda rng=rng: 1 + rng.uniform(-jitter, jitter))
            if (rank, step) in faults:
                call, factor = faults[(rank, step)]
                if call not in data:
                    sys.exit(f"--fault: no entry {call!r} in {src_dir}/dump.json")
                data[call]["output"] = _scaled(data[call].get("output"), lambda factor=factor: factor)
            with open(os.path.join(npu_dir, "dump.json"), "w", encoding="utf-8") as handle:
                json.dump(dict(dump, data=data), handle)
    compare_json = os.path.join(out_root, "compare.json")
    with open(compare_json, "w", encoding="utf-8") as handle:
        json.dump({"npu_path": os.path.join(out_root, "npu"), "bench_path": os.path.join(out_root, "bench")}, handle)
    return compare_json


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src_rank_dir")
    parser.add_argument("out_root")
    parser.add_argument("--ranks", type=int, required=True)
    parser.add_argument("--steps", type=int, default=1)
    parser.add_argument("--jitter", type=float, default=1e-8)
    parser.add_argument("--fault", type=_fault, action="append", default=[])
    args = parser.parse_args()
    start = time.time()
    compare_json = make_tree(args.src_rank_dir, args.out_root, args.ranks, args.steps, args.jitter, args.fault)
    print(json.dumps({"compare_json": compare_json, "ranks": args.ranks, "steps": args.steps,
                      "faults": len(args.fault), "seconds": round(time.time() - start, 2)}))


if __name__ == "__main__":
    main()
