"""Small fp16 models with known fragile APIs, and a runner for free_benchmark configs."""
import csv
import json
import os

import torch

from msprobe.core.free_benchmark.csv_writer import HEADER


class FragileNet(torch.nn.Module):
    """fp16: a long product (torch.prod accumulates in fp16 on CPU: error ~1e-2) between harmless ops."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(64, 256).half()

    def forward(self, x):
        h = torch.relu(self.lin(x))
        p = torch.prod(1 + 0.01 * h, dim=1, keepdim=True)   # 256 factors near 1
        return (h * p).sum()


def fragile_input(seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(8, 64, generator=g).half()


def nearly_equal_pair():
    """a - b of fp16 numbers 4 ulps apart: exact in fp16, but one flipped bit changes it by 25%."""
    b = torch.full((16,), 1.0) + torch.arange(16) * 2 ** -8
    a = b + 4 * 2 ** -10
    return a.half(), b.half()


def write_config(root, section, task="free_benchmark", **top):
    path = os.path.join(root, f"{task}.json")
    cfg = {"task": task, "dump_path": os.path.join(root, "out"), "level": "L1", task: section, **top}
    with open(path, "w") as handle:
        json.dump(cfg, handle)
    return path


def read_rows(root):
    path = os.path.join(root, "out", "free_benchmark.csv")
    if not os.path.exists(path):
        return []
    with open(path, newline="") as handle:
        rows = list(csv.reader(handle))
    assert tuple(rows[0]) == HEADER
    return [dict(zip(HEADER, row)) for row in rows[1:]]
