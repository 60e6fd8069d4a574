"""The README demo: dump a reference fp32 run and a bf16 "port" of a small model, compare them, name the bug.

The port has a real bug besides bf16: its hand-written tanh GELU uses 0.7 where the formula needs
sqrt(2/pi) = 0.79788. The compare's advisor must find that call among the ordinary bf16 rounding
differences (which it judges against bf16's precision and lets pass) and say why.

usage: python examples/demo.py [--out demo_output] [--task statistics|tensor] [--no-bug]
"""
import argparse
import json
import math
import os
import subprocess
import sys

GELU_CONSTANT = math.sqrt(2.0 / math.pi)
BUGGY_CONSTANT = 0.7


def _model(constant):
    import torch
    import torch.nn as nn

    class TanhGELU(nn.Module):
        """GELU by its tanh formula, as a hand-written (fused) kernel would compute it."""

        def __init__(self):
            super().__init__()
            self.constant = constant

        def forward(self, x):
            return 0.5 * x * (1.0 + torch.tanh(self.constant * (x + 0.044715 * x.pow(3))))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1, self.act, self.ln, self.l2 = nn.Linear(16, 32), TanhGELU(), nn.LayerNorm(32), nn.Linear(32, 4)

        def forward(self, x):
            return self.l2(self.ln(self.act(self.l1(x))))

    return MLP()


def train(dump_path, dtype, constant, task, steps=2):
    """Train `steps` steps under msprobe's PrecisionDebugger (same seed and data for every run)."""
    import torch

    from msprobe.pytorch import PrecisionDebugger, seed_all

    seed_all(1234)
    torch_dtype = torch.bfloat16 if dtype == "bf16" else torch.float32
    model = _model(constant).to(torch_dtype)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    os.makedirs(dump_path, exist_ok=True)
    config_path = os.path.join(dump_path, "msprobe_config.json")
    with open(config_path, "w") as handle:
        json.dump({"task": task, "dump_path": dump_path, "level": "mix", task: {"summary_mode": "statistics"}},
                  handle)
    debugger = PrecisionDebugger(config_path=config_path, model=model)
    data = torch.randn(steps, 8, 16, generator=torch.Generator().manual_seed(0))
    for step in range(steps):
        debugger.start()
        loss = model(data[step].to(torch_dtype)).float().pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        debugger.stop()
        debugger.step()
        print(f"  {dtype} step {step} loss {loss.item():.6f}")
    debugger.close()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="demo_output", help="output directory (default: demo_output)")
    parser.add_argument("--task", default="tensor", choices=("statistics", "tensor"))
    parser.add_argument("--no-bug", action="store_true", help="port to bf16 only: no suspect should be found")
    parser.add_argument("--side", choices=("fp32", "bf16"), help=argparse.SUPPRESS)  # one run, in a subprocess
    parser.add_argument("--dump-path", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.side:
        constant = BUGGY_CONSTANT if args.side == "bf16" and not args.no_bug else GELU_CONSTANT
        train(args.dump_path, args.side, constant, args.task)
        return 0
    out = os.path.abspath(args.out)
    runs = {}
    for dtype in ("fp32", "bf16"):
        dump_path = os.path.join(out, f"dump_{dtype}")
        what = "the reference" if dtype == "fp32" else "the bf16 port" + ("" if args.no_bug else " (GELU constant 0.7)")
        print(f"== dumping {what} into {dump_path}")
        command = [sys.executable, os.path.abspath(__file__), "--side", dtype, "--dump-path", dump_path,
                   "--task", args.task] + (["--no-bug"] if args.no_bug else [])
        subprocess.run(command, check=True)
        runs[dtype] = os.path.join(dump_path, "step0", "rank")
    compare_json = os.path.join(out, "compare.json")
    with open(compare_json, "w") as handle:
        json.dump({"npu_path": os.path.join(runs["bf16"], "dump.json"),
                   "bench_path": os.path.join(runs["fp32"], "dump.json"),
                   "stack_path": os.path.join(runs["bf16"], "stack.json"),
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
