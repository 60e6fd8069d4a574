"""Dump overhead of msprobe.pytorch.PrecisionDebugger on a small GPT-style model (CPU, 2 threads).

usage: python benchmarks/dump_overhead.py [config ...]      configs: statistics:L1 statistics:mix tensor:L1
Runs, in one process, the training loop without the debugger and then with it for each config
(a baseline run right before each debugger run, REPEATS times, default 2), and prints one JSON
line per config with the lowest median step time of each side (steps 2..STEPS, env STEPS, default 6;
the lowest is the run least disturbed by other processes) and their ratio. The model is the one of
/work/shared/bench/dump_overhead.py (4 blocks, d=256, seq 128, batch 8, AdamW).
"""
import json
import os
import statistics
import sys
import time

import torch
import torch.nn as nn

from overhead_runner import run_configs

STEPS = int(os.environ.get("STEPS", "6"))
REPEATS = int(os.environ.get("REPEATS", "2"))
TARGETS = {"statistics:L1": 1.3, "statistics:mix": 1.5, "tensor:L1": 4.0}


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, h, batch_first=True)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        y = self.ln1(x)
        x = x + self.attn(y, y, y, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab=1000, d=256, layers=4, heads=4, ctx=128):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.zeros(1, ctx, d))
        self.blocks = nn.ModuleList([Block(d, heads) for _ in range(layers)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, idx):
        x = self.emb(idx) + self.pos[:, : idx.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def debugged_step(config_path):
    """One training step of GPT under PrecisionDebugger(config_path) (seed 0, 2 threads); the debugger is
    closed, so its files are complete (run_ut_speed and online_run_ut_speed dump with it)."""
    from msprobe.pytorch import PrecisionDebugger

    torch.manual_seed(0)
    torch.set_num_threads(2)
    model = GPT()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    debugger = PrecisionDebugger(config_path=config_path, model=model)
    idx, tgt = torch.randint(0, 1000, (8, 128)), torch.randint(0, 1000, (8, 128))
    debugger.start()
    loss = nn.functional.cross_entropy(model(idx).view(-1, 1000), tgt.view(-1))
    loss.backward()
    opt.step()
    opt.zero_grad()
    debugger.stop()
    debugger.step()
    debugger.close()


def train(debugger_config=None, dump_path=None):
    """Median step time and losses of STEPS training steps (with the debugger when configured)."""
    torch.manual_seed(0)
    model = GPT()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    debugger = None
    if debugger_config:
        from msprobe.pytorch import PrecisionDebugger
        task, level = debugger_config.split(":")
        cfg_path = dump_path + ".config.json"
        with open(cfg_path, "w") as handle:
            json.dump({"task": task, "dump_path": dump_path, "level": level, task: {}}, handle)
        debugger = PrecisionDebugger(config_path=cfg_path, model=model)
    return timed_steps(model, opt, debugger)


def timed_steps(model, opt, debugger):
    """STEPS training steps (start/stop/step around each when a debugger is given): the median step time
    after two warm-up steps, and the losses."""
    times, losses = [], []
    for _ in range(STEPS):
        idx = torch.randint(0, 1000, (8, 128))
        tgt = torch.randint(0, 1000, (8, 128))
        t0 = time.perf_counter()
        if debugger:
            debugger.start()
        loss = nn.functional.cross_entropy(model(idx).view(-1, 1000), tgt.view(-1))
        loss.backward()
        opt.step()
        opt.zero_grad()
        if debugger:
            debugger.stop()
            debugger.step()
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())
    if debugger:
        debugger.close()
    return statistics.median(times[2:]), losses


def main(configs):
    torch.set_num_threads(2)
    run_configs(train, configs, STEPS, REPEATS, TARGETS)


if __name__ == "__main__":
    main(sys.argv[1:] or list(TARGETS))
