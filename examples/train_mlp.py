"""Train a tiny MLP for a few steps under msprobe's PrecisionDebugger and write the dump.

usage: python examples/train_mlp.py --dump-path ./dump_fp32 [--dtype fp32|bf16] [--seed 1234]
                                    [--task statistics|tensor|overflow_check] [--level L0|L1|mix|L2]
                                    [--steps 2] [--summary-mode statistics|md5]

Run it twice (fp32 and bf16) and compare the two dumps to see where bf16 loses accuracy:
    python examples/train_mlp.py --dump-path out/fp32
    python examples/train_mlp.py --dump-path out/bf16 --dtype bf16
    msprobe -f pytorch compare -i compare.json -o out/report
"""
import argparse
import json
import os

import torch
import torch.nn as nn

from msprobe.pytorch import PrecisionDebugger, seed_all


class MLP(nn.Module):
    """Linear -> GELU -> LayerNorm -> Linear, the shape of the reference samples' model."""

    def __init__(self, width=32):
        super().__init__()
        self.l1 = nn.Linear(16, width)
        self.act = nn.GELU()
        self.ln = nn.LayerNorm(width)
        self.l2 = nn.Linear(width, 4)

    def forward(self, x):
        return self.l2(self.ln(self.act(self.l1(x))))


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dump-path", required=True, help="directory the dump is written to")
    parser.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--task", default="statistics", choices=("statistics", "tensor", "overflow_check"))
    parser.add_argument("--level", default="mix", choices=("L0", "L1", "mix", "L2"))
    parser.add_argument("--summary-mode", default="statistics", choices=("statistics", "md5"))
    parser.add_argument("--steps", type=int, default=2)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    seed_all(args.seed)
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    model = MLP().to(dtype)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    os.makedirs(args.dump_path, exist_ok=True)
    config_path = os.path.join(args.dump_path, "msprobe_config.json")
    with open(config_path, "w") as handle:
        json.dump({"task": args.task, "dump_path": args.dump_path, "level": args.level,
                   args.task: {"summary_mode": args.summary_mode} if args.task != "overflow_check" else {}},
                  handle)
    debugger = PrecisionDebugger(config_path=config_path, model=model)
    data = torch.randn(args.steps, 8, 16)  # same inputs for every dtype
    for step in range(args.steps):
        debugger.start()
        loss = model(data[step].to(dtype)).float().pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        debugger.stop()
        debugger.step()
        print(f"step {step} loss {loss.item():.6f}")
    debugger.close()
    return args.dump_path


if __name__ == "__main__":
    main()
