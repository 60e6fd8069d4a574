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


class RenamedMLP(MLP):
    """MLP whose first layer is called `fc1`: same weights for the same seed, other module names."""

    def __init__(self, broken=False):
        nn.Module.__init__(self)
        self.fc1 = nn.Linear(16, 32)
        self.act = GELU(broken)
        self.ln = nn.LayerNorm(32)
        self.l2 = nn.Linear(32, 4)

    def forward(self, x):
        return self.l2(self.ln(self.act(self.fc1(x))))


def dump_mlp(out_dir, task="statistics", level="mix", dtype="fp32", seed=1234, data_seed=99, broken=False,
             steps=1, summary_mode="statistics", nan_input=False, extra_call=False, renamed=False):
    """Train `steps` steps of MLP (RenamedMLP if `renamed`) under the debugger; returns the step0 rank
    directory."""
    from msprobe.pytorch import PrecisionDebugger

    torch.manual_seed(seed)
    model = (RenamedMLP if renamed else MLP)(broken)
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


def dump_calls(out_dir, calls, task="statistics", level="L1"):
    """Dump one step in which `calls()` runs (plain torch calls, inputs made beforehand); returns the
    step0 rank directory."""
    from msprobe.pytorch import PrecisionDebugger

    config = {"task": task, "dump_path": out_dir, "rank": [], "step": [], "level": level,
              task: {"scope": [], "list": [], "data_mode": ["all"]}}
    os.makedirs(out_dir, exist_ok=True)
    config_path = os.path.join(out_dir, "config.json")
    with open(config_path, "w") as handle:
        json.dump(config, handle)
    debugger = PrecisionDebugger(config_path=config_path)
    debugger.start()
    calls()
    debugger.stop()
    debugger.step()
    debugger.close()
    step0 = os.path.join(out_dir, "step0")
    return os.path.join(step0, sorted(os.listdir(step0))[0])


def awkward_calls(side):
    """Calls whose data is awkward to compare; `side` ('npu' or 'bench') picks which values they see."""
    npu = side == "npu"
    generator = torch.Generator().manual_seed(5)
    inputs = {
        "ints": torch.tensor([1, 2, 3] if npu else [1, 2, 4]),
        "bools": torch.tensor([True, False] if npu else [True, True]),
        "dtype": torch.tensor([1, 2], dtype=torch.int32 if npu else torch.int64),
        "empty": torch.zeros(0, 4),
        "nan": torch.tensor([float("nan"), 1.0] if npu else [1.0, float("nan")]),
        "inf": torch.tensor([float("inf"), 1.0]),
        "scalar": torch.tensor(2.0 if npu else 1.5),
        "shape": torch.randn(2, 3, generator=generator) if npu else torch.randn(3, 2, generator=generator),
        "low": torch.randn(4, 4, generator=torch.Generator().manual_seed(6)),
    }
    if npu:
        inputs["low"] = inputs["low"].to(torch.bfloat16)

    def calls():
        torch.add(inputs["ints"], 1)
        torch.logical_not(inputs["bools"])
        torch.neg(inputs["dtype"])
        torch.relu(inputs["empty"])
        torch.abs(inputs["nan"])
        torch.abs(inputs["inf"])
        torch.exp(inputs["scalar"])
        torch.sigmoid(inputs["shape"])
        torch.tanh(inputs["low"])

    return calls
