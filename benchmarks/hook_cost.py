"""CPU time of the PyTorch dump hooks per training step, by level, on a small residual model.

usage: python benchmarks/hook_cost.py [level ...]        levels: L0 L1 mix L2 (default L0 L1 mix)
A model of 8 blocks (LayerNorm, two Linear, ReLU, residual; d=16, batch 4) is small enough that the step
time is almost all hook time, so the figure follows the cost of the hooks themselves (statistics task).
Prints one JSON line per level: the lowest process CPU time of REPEATS steps (env, default 25) with
and without the debugger, in ms. CPU time, not wall time: on a shared machine it moves less.
"""
import json
import os
import sys
import tempfile
import time

import torch
import torch.nn as nn

from msprobe.pytorch import PrecisionDebugger

REPEATS = int(os.environ.get("REPEATS", "25"))


class Block(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.l1 = nn.Linear(d, d)
        self.l2 = nn.Linear(d, d)

    def forward(self, x):
        return x + self.l2(torch.relu(self.l1(self.ln(x)))) * 0.5


def lowest_step_time(model, x, debugger=None):
    best = float("inf")
    for _ in range(REPEATS):
        if debugger:
            debugger.start()
        start = time.process_time()
        model(x).pow(2).mean().backward()
        best = min(best, time.process_time() - start)
        if debugger:
            debugger.stop()
            debugger.step()
    return best


def main(levels):
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = nn.Sequential(*[Block() for _ in range(8)])
    x = torch.randn(4, 16)
    for level in levels:
        with tempfile.TemporaryDirectory() as root:
            config = os.path.join(root, "config.json")
            with open(config, "w") as handle:
                json.dump({"task": "statistics", "dump_path": os.path.join(root, "dump"), "level": level,
                           "statistics": {}}, handle)
            debugger = PrecisionDebugger(config_path=config, model=model)
            with_hooks = lowest_step_time(model, x, debugger)
            debugger.close()
        without = lowest_step_time(model, x)
        print(json.dumps({"level": level, "cpu_ms_with": round(with_hooks * 1e3, 2),
                          "cpu_ms_without": round(without * 1e3, 2)}))


if __name__ == "__main__":
    main(sys.argv[1:] or ["L0", "L1", "mix"])
