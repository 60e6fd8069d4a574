"""The README demo: dump an fp32 and a bf16 run of a small model, compare them, say where the report is.

usage: python examples/demo.py [--out demo_output] [--task statistics|tensor]
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="demo_output", help="output directory (default: demo_output)")
    parser.add_argument("--task", default="tensor", choices=("statistics", "tensor"))
    args = parser.parse_args(argv)
    out = os.path.abspath(args.out)
    runs = {}
    for dtype in ("fp32", "bf16"):
        dump_path = os.path.join(out, f"dump_{dtype}")
        print(f"== dumping the {dtype} run into {dump_path}")
        subprocess.run([sys.executable, os.path.join(HERE, "train_mlp.py"), "--dump-path", dump_path,
                        "--dtype", dtype, "--task", args.task], check=True)
        runs[dtype] = dump_path
    compare_json = os.path.join(out, "compare.json")
    with open(compare_json, "w") as handle:
        json.dump({"npu_path": os.path.join(runs["bf16"], "step0", "rank", "dump.json"),
                   "bench_path": os.path.join(runs["fp32"], "step0", "rank", "dump.json"),
                   "stack_path": os.path.join(runs["bf16"], "step0", "rank", "stack.json"),
                   "is_print_compare_log": True}, handle, indent=1)
    report_dir = os.path.join(out, "report")
    print(f"== comparing bf16 (npu side) against fp32 (bench side) -> {report_dir}")
    from msprobe.cli import main as msprobe_main

    before = set(os.listdir(report_dir)) if os.path.isdir(report_dir) else set()
    code = msprobe_main(["-f", "pytorch", "compare", "-i", compare_json, "-o", report_dir])
    if code == 0:
        # this run's files only (the directory keeps the reports of earlier runs)
        reports = sorted(f for f in set(os.listdir(report_dir)) - before if f.endswith((".xlsx", ".txt")))
        print("== done. Reports:")
        for name in reports:
            print("   ", os.path.join(report_dir, name))
    return code


if __name__ == "__main__":
    sys.exit(main())
