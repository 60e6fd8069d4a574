"""Small real models and a helper that dumps one training step of them with msprobe's PrecisionDebugger."""
import json
import os

import torch
import torch.nn as nn
import torch.nn.functional as F


class GELU(nn.Module):
    """Same class name as torch's GELU so module rows keep their names; `broken` corrupts the output."""

    def __init__(self, broken=False):
        super().__init__()
        self.broken = broken

    def forward(self, x):
        y = F.gelu(x)
        if self.broken:
            y = y * 3.0 - 0.5
        return y


class MLP(nn.Module):
    def __init__(self, broken=False):
        super().__init__()
        self.l1 = nn.Linear(16, 32)
        self.act = GELU(broken)
        self.ln = nn.LayerNorm(32)
        self.l2 = nn.Linear(32, 4)

    def forward(self, x):
        return self.l2(self.ln(self.act(self.l1(x))))


def dump_mlp(out_dir, task="statistics", level="mix", dtype="fp32", seed=1234, data_seed=99, broken=False,
             steps=1, summary_mode="statistics", nan_input=False, extra_call=False):
    """Train `steps` steps of MLP under the debugger; returns the step0 rank directory."""
    from msprobe.pytorch import PrecisionDebugger

    torch.manual_seed(seed)
    model = MLP(broken)
    if dtype == "bf16":
        model = model.to(torch.bfloat16)
    config = {"task": task, "dump_path": out_dir, "rank": [], "step": [], "level": level,
              task: {"scope": [], "list": [], "data_mode": ["all"], "summary_mode": summary_mode}}
    os.makedirs(out_dir, exist_ok=True)
    config_path = os.path.join(out_dir, "config.json")
    with open(config_path, "w") as handle:
        json.dump(config, handle)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    debugger = PrecisionDebugger(config_path=config_path, model=model)
    generator = torch.Generator().manual_seed(data_seed)
    for _ in range(steps):
        x = torch.randn(8, 16, generator=generator)
        if nan_input:
            x[0, 0] = float("nan")
        debugger.start()
        if dtype == "bf16":
            x = x.to(torch.bfloat16)
        if extra_call:  # one more gelu before the model: every later gelu call counter shifts by one
            F.gelu(torch.ones(3))
        loss = model(x).float().pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        debugger.stop()
        debugger.step()
    debugger.close()  # the writer is asynchronous
    step0 = os.path.join(out_dir, "step0")
    ranks = sorted(os.listdir(step0))
    return os.path.join(step0, ranks[0])
