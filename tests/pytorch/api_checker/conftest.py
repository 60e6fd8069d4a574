"""Dumps of small real models, recorded once per session with msprobe's own PrecisionDebugger."""
import os

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F


class TinyMlp(nn.Module):
    """linear -> gelu -> layer_norm -> linear -> softmax, in the parameters' dtype."""

    def __init__(self, dtype):
        super().__init__()
        torch.manual_seed(0)
        self.l1 = nn.Linear(16, 64).to(dtype)
        self.ln = nn.LayerNorm(64).to(dtype)
        self.l2 = nn.Linear(64, 8).to(dtype)

    def forward(self, x):
        hidden = F.layer_norm(F.gelu(F.linear(x, self.l1.weight, self.l1.bias)), (64,), self.ln.weight, self.ln.bias)
        return F.softmax(F.linear(hidden, self.l2.weight, self.l2.bias), dim=-1)


def record_dump(out_dir, task, dtype, steps_of_work=1):
    """Run one training step of TinyMlp under PrecisionDebugger (level L1); return dump.json's path."""
    from msprobe.pytorch import PrecisionDebugger

    model = TinyMlp(dtype)
    debugger = PrecisionDebugger(task=task, dump_path=str(out_dir), level="L1")
    torch.manual_seed(1)
    x = torch.randn(32, 16).to(dtype)
    debugger.start()
    for _ in range(steps_of_work):
        loss = model(x).pow(2).mean()
        loss.backward()
    debugger.stop()
    debugger.close()  # files are written off the training thread
    path = os.path.join(str(out_dir), "step0", "rank", "dump.json")
    assert os.path.isfile(path), os.listdir(str(out_dir))
    return path


@pytest.fixture(scope="session")
def bf16_statistics_dump(tmp_path_factory):
    return record_dump(tmp_path_factory.mktemp("bf16_stat"), "statistics", torch.bfloat16)


@pytest.fixture(scope="session")
def fp32_tensor_dump(tmp_path_factory):
    return record_dump(tmp_path_factory.mktemp("fp32_tensor"), "tensor", torch.float32)


@pytest.fixture(scope="session")
def long_dump(tmp_path_factory):
    """A dump with a few hundred API calls, long enough to kill run_ut halfway."""
    from msprobe.pytorch import PrecisionDebugger

    out_dir = tmp_path_factory.mktemp("long")
    debugger = PrecisionDebugger(task="statistics", dump_path=str(out_dir), level="L1")
    torch.manual_seed(2)
    x = torch.randn(64, 64)
    weight = torch.randn(64, 64) * 0.1
    debugger.start()
    for _ in range(120):
        x = torch.tanh(torch.matmul(x, weight)) + x * 0.5
    debugger.stop()
    debugger.close()  # files are written off the training thread
    return os.path.join(str(out_dir), "step0", "rank", "dump.json")
