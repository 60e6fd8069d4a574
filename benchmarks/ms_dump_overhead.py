"""Dump overhead of `msprobe.mindspore.PrecisionDebugger` on a small GPT-style MindSpore model (CPU).

usage: python benchmarks/ms_dump_overhead.py [config ...]   configs: statistics:L1 statistics:mix tensor:L1 ...
Same method as benchmarks/dump_overhead.py: in one process, the PyNative training loop runs without
the debugger and then with it for each config (a baseline run right before each debugger run, REPEATS
times, default 2); one JSON line per config gives the lowest median step time of each side (steps
2..STEPS, env STEPS, default 6) and their ratio. The model uses only ops with CPU kernels in MindSpore
2.10 (no embedding/layer_norm/gelu), so the input is a float tensor and normalisation is RMSNorm
written with mint.
"""
import json
import os
import statistics
import sys
import time

from overhead_runner import run_configs

import numpy as np
import mindspore as ms
from mindspore import mint, nn, Tensor

STEPS = int(os.environ.get("STEPS", "6"))
REPEATS = int(os.environ.get("REPEATS", "2"))
TARGETS = {"statistics:L1": 2.0}
D, HEADS, LAYERS, CTX, BATCH = 256, 4, 4, 128, 8


class RMSNorm(nn.Cell):
    def __init__(self, d):
        super().__init__()
        self.weight = ms.Parameter(Tensor(np.ones(d, np.float32)), name="weight")

    def construct(self, x):
        return x * mint.rsqrt(mint.mean(mint.square(x), -1, True) + 1e-6) * self.weight


class Block(nn.Cell):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = RMSNorm(d), RMSNorm(d)
        self.qkv = mint.nn.Linear(d, 3 * d)
        self.proj = mint.nn.Linear(d, d)
        self.up = mint.nn.Linear(d, 4 * d)
        self.down = mint.nn.Linear(4 * d, d)

    def construct(self, x):
        b, t, d = x.shape
        q, k, v = mint.split(self.qkv(self.norm1(x)), d, -1)
        q = q.reshape(b, t, self.heads, -1).transpose(0, 2, 1, 3)
        k = k.reshape(b, t, self.heads, -1).transpose(0, 2, 1, 3)
        v = v.reshape(b, t, self.heads, -1).transpose(0, 2, 1, 3)
        att = mint.softmax(mint.matmul(q, k.transpose(0, 1, 3, 2)) / (d // self.heads) ** 0.5, -1)
        y = mint.matmul(att, v).transpose(0, 2, 1, 3).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.down(mint.nn.functional.silu(self.up(self.norm2(x))))


class GPT(nn.Cell):
    def __init__(self):
        super().__init__()
        self.blocks = nn.CellList([Block(D, HEADS) for _ in range(LAYERS)])
        self.norm = RMSNorm(D)
        self.head = mint.nn.Linear(D, 512)

    def construct(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def timed_training(model, opt, steps, before=None, after=None):
    """(median step seconds over steps 2.., losses) of `steps` training steps of `model` on seeded random data;
    `before()` / `after()` run inside each timed step (a debugger's start and stop)."""
    def loss_fn(x, target):
        return mint.mean(mint.square(model(x) - target))

    grad_fn = ms.value_and_grad(loss_fn, None, opt.parameters)
    rng = np.random.RandomState(0)
    times, losses = [], []
    for _ in range(steps):
        x = Tensor(rng.randn(BATCH, CTX, D).astype(np.float32))
        target = Tensor(rng.randn(BATCH, CTX, 512).astype(np.float32))
        t0 = time.perf_counter()
        if before:
            before()
        loss, grads = grad_fn(x, target)
        opt(grads)
        if after:
            after()
        losses.append(float(loss.asnumpy()))
        times.append(time.perf_counter() - t0)
    return statistics.median(times[2:]), losses


def train(config=None, dump_path=None):
    """Median step time and losses of STEPS training steps (with the debugger when configured)."""
    ms.set_seed(0)
    model = GPT()
    opt = nn.AdamWeightDecay(model.trainable_params(), 1e-3)
    if not config:
        return timed_training(model, opt, STEPS)
    from msprobe.mindspore import PrecisionDebugger
    task, level = config.split(":")
    cfg_path = dump_path + ".config.json"
    with open(cfg_path, "w") as handle:
        json.dump({"task": task, "dump_path": dump_path, "level": level, task: {}}, handle)
    debugger = PrecisionDebugger(config_path=cfg_path)

    def after():
        debugger.stop()
        debugger.step()
    result = timed_training(model, opt, STEPS, before=lambda: debugger.start(model), after=after)
    debugger.close()
    return result


def main(configs):
    ms.set_device("CPU")
    run_configs(train, configs, STEPS, REPEATS, TARGETS, framework="mindspore")


if __name__ == "__main__":
    main(sys.argv[1:] or ["statistics:L1", "statistics:mix"])
