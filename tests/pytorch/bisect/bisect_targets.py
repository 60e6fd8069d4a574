"""bisect_target() scripts for the bisection tests: a bf16 model whose named modules lose precision."""
import os

import torch
from torch import nn

CULPRITS = [name for name in os.environ.get("BISECT_CULPRITS", "").split(",") if name]


class Offset(nn.Module):
    """(x + 512) - 512: exact in float32, in bfloat16 it keeps about two bits of x (the kind of op that breaks)."""

    def forward(self, x):
        return (x + 512.0) - 512.0


class Block(nn.Module):
    def __init__(self, lossy):
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.act = nn.GELU()
        self.shift = Offset() if lossy else nn.Identity()
        self.norm = nn.LayerNorm(16)

    def forward(self, x):
        return self.norm(x + self.shift(self.act(self.fc(x))))


def bisect_target():
    torch.manual_seed(0)
    blocks = nn.Sequential(*(Block(lossy=f"blocks.{n}.shift" in CULPRITS) for n in range(6)))
    model = nn.Sequential()
    model.add_module("embed", nn.Linear(8, 16))
    model.add_module("blocks", blocks)
    model.add_module("head", nn.Linear(16, 4))
    model = model.bfloat16()
    inputs = torch.randn(64, 8, generator=torch.Generator().manual_seed(1)).bfloat16()
    reference = torch.randn(64, 4, generator=torch.Generator().manual_seed(2))

    def evaluate():
        with torch.no_grad():
            return float(torch.nn.functional.mse_loss(model(inputs).float(), reference))

    return model, evaluate
