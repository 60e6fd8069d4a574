"""Dump overhead of `msprobe.mindspore.PrecisionDebugger` on a small GPT-style MindSpore model (CPU).

usage: python benchmarks/ms_dump_overhead.py none|tool [task] [level] [summary_mode]
  none  runs the same PyNative training loop without the debugger.
Prints one JSON line with the median step time over steps 2..STEPS (env STEPS, default 6).
Same method as the PyTorch benchmark: the overhead is the ratio of the two medians, run back to back.
The model uses only ops with CPU kernels in MindSpore 2.10 (no embedding/layer_norm/gelu), so the
input is a float tensor and normalisation is RMSNorm written with mint.
"""
import json
import os
import shutil
import statistics
import sys
import time

import numpy as np
import mindspore as ms
from mindspore import mint, nn, Tensor

ms.set_device("CPU")
ms.set_seed(0)
mode = sys.argv[1] if len(sys.argv) > 1 else "none"
task = sys.argv[2] if len(sys.argv) > 2 else "statistics"
level = sys.argv[3] if len(sys.argv) > 3 else "L1"
summary = sys.argv[4] if len(sys.argv) > 4 else "statistics"
STEPS = int(os.environ.get("STEPS", "6"))
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


model = GPT()
opt = nn.AdamWeightDecay(model.trainable_params(), 1e-3)


def loss_fn(x, target):
    return mint.mean(mint.square(model(x) - target))


grad_fn = ms.value_and_grad(loss_fn, None, opt.parameters)
debugger = None
if mode != "none":
    out = os.environ.get("DUMP_DIR", f"/tmp/ms_dump_overhead_{task}_{level}_{summary}")
    shutil.rmtree(out, ignore_errors=True)
    cfg = {"task": task, "dump_path": out, "rank": [], "step": [], "level": level,
           task: {"scope": [], "list": [], "data_mode": ["all"], "summary_mode": summary}}
    cfg_path = out.rstrip("/") + ".config.json"
    with open(cfg_path, "w") as handle:
        json.dump(cfg, handle)
    from msprobe.mindspore import PrecisionDebugger
    debugger = PrecisionDebugger(config_path=cfg_path)

rng = np.random.RandomState(0)
times, losses = [], []
for step in range(STEPS):
    x = Tensor(rng.randn(BATCH, CTX, D).astype(np.float32))
    target = Tensor(rng.randn(BATCH, CTX, 512).astype(np.float32))
    t0 = time.perf_counter()
    if debugger:
        debugger.start(model)
    loss, grads = grad_fn(x, target)
    opt(grads)
    if debugger:
        debugger.stop()
        debugger.step()
    losses.append(float(loss.asnumpy()))
    times.append(time.perf_counter() - t0)
if debugger:
    debugger.close()
print(json.dumps({"framework": "mindspore", "mode": mode, "task": task, "level": level, "summary_mode": summary,
                  "steps": STEPS, "median_step_s": round(statistics.median(times[1:]), 4),
                  "last_loss": round(losses[-1], 6)}))
