"""Small real models and a helper that trains them under PrecisionDebugger and loads the dump."""
import json
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

from msprobe.pytorch import PrecisionDebugger

REFERENCE_SAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "reference_samples")


class SampleNet(nn.Module):
    """The model of the reference samples (samples/how_these_were_made_train.py)."""

    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(16, 32)
        self.act = nn.GELU()
        self.l2 = nn.Linear(32, 4)
        self.ln = nn.LayerNorm(32)

    def forward(self, x):
        return self.l2(self.ln(self.act(self.l1(x))))


class MLP(nn.Module):
    def __init__(self, width=8):
        super().__init__()
        self.fc1 = nn.Linear(4, width)
        self.fc2 = nn.Linear(width, 2)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class TinyTransformer(nn.Module):
    def __init__(self, vocab=20, d=16, heads=2):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.ln = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
        self.head = nn.Linear(d, vocab)

    def forward(self, idx):
        x = self.emb(idx)
        y = self.ln(x)
        x = x + self.attn(y, y, y, need_weights=False)[0]
        x = x + self.mlp(x)
        return self.head(x)


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.relu = nn.ReLU(inplace=True)
        self.fc = nn.Linear(4 * 4 * 4, 3)

    def forward(self, x):
        x = F.max_pool2d(self.relu(self.bn(self.conv(x))), 2)
        return self.fc(x.flatten(1))


def batch_for(model, seed=0):
    gen = torch.Generator().manual_seed(seed)
    if isinstance(model, TinyTransformer):
        return torch.randint(0, 20, (2, 5), generator=gen)
    if isinstance(model, ConvNet):
        return torch.randn(2, 1, 8, 8, generator=gen)
    if isinstance(model, SampleNet):
        return torch.randn(8, 16, generator=gen)
    return torch.randn(3, 4, generator=gen)


def write_config(tmp_path, task="statistics", level="L1", section=None, **top):
    cfg = {"task": task, "dump_path": str(tmp_path / "dump"), "level": level, task: section or {}}
    cfg.update(top)
    path = tmp_path / f"config_{task}_{level}.json"
    path.write_text(json.dumps(cfg))
    return str(path)


def train(model, debugger=None, steps=1, seed=0, lr=0.1):
    """Train `steps` SGD steps; returns the list of losses (floats)."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for step in range(steps):
        if debugger:
            debugger.start()
        out = model(batch_for(model, seed + step))
        loss = out.float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        if debugger:
            debugger.stop()
            debugger.step()
        losses.append(loss.item())
    return losses


def run_dump(tmp_path, model, task="statistics", level="L1", section=None, steps=1, **top):
    """Dump `steps` training steps of `model`; returns the dump root path."""
    config = write_config(tmp_path, task, level, section, **top)
    debugger = PrecisionDebugger(config_path=config, model=model)
    train(model, debugger, steps=steps)
    debugger.close()
    return tmp_path / "dump"


def load_rank(root, step=0, rank=None):
    """(dump.json, stack.json, construct.json) of one step/rank as dicts."""
    rank_dir = root / f"step{step}" / ("rank" if rank is None else f"rank{rank}")
    return tuple(json.loads((rank_dir / name).read_text()) for name in ("dump.json", "stack.json", "construct.json"))


def tensor_descriptors(value):
    """Every tensor descriptor inside a dump.json value (walks lists and dicts)."""
    if isinstance(value, list):
        return [d for item in value for d in tensor_descriptors(item)]
    if isinstance(value, dict):
        if value.get("type") == "torch.Tensor":
            return [value]
        return [d for item in value.values() for d in tensor_descriptors(item)]
    return []
