"""Dumping again into a dump_path that holds an earlier run: no tensor file is ever written through a name an
earlier file shares (hard links), and a step folder this run writes holds only this run's files."""
import os

import torch
import torch.nn as nn

from core_dump_helpers import check_tensor_files
from msprobe.core.dump import direct_io
from msprobe.pytorch import PrecisionDebugger


class LinearRelu(nn.Module):
    """relu's input is linear's output: one tensor file and a hard link."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return torch.relu(self.lin(x))


class LinearPlusRelu(nn.Module):
    """relu's input is a parameter: its file is written, not linked, under the name that was a link before."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.shift = nn.Parameter(torch.full((4,), 40.0))

    def forward(self, x):
        return self.lin(x) + torch.relu(self.shift)


def _dump(model, path, steps, step_filter=None):
    debugger = PrecisionDebugger(task="tensor", dump_path=str(path), level="L1", model=model, step=step_filter)
    for _ in range(steps):
        debugger.start()
        model(torch.randn(3, 4)).sum().backward()
        debugger.stop()
        debugger.step()
    debugger.close()


def test_a_second_run_into_the_same_path_leaves_every_tensor_file_matching_its_statistics(tmp_path):
    torch.manual_seed(0)
    _dump(LinearRelu(), tmp_path, steps=2)
    first = tmp_path / "step0" / "rank" / "dump_tensor_data"
    linked = first / "Torch.relu.0.forward.input.0.pt"
    assert os.stat(linked).st_nlink == 2  # the situation of the defect: two names, one inode
    step1_before = {p.name: p.read_bytes() for p in (tmp_path / "step1" / "rank" / "dump_tensor_data").iterdir()}

    _dump(LinearPlusRelu(), tmp_path, steps=2, step_filter=[0])

    named = check_tensor_files(tmp_path / "step0" / "rank")
    assert "Torch.relu.0.forward.input.0.pt" in named
    # the step folder written again holds this run's files only; the step not dumped again is kept as it was
    assert set(os.listdir(first)) == named
    check_tensor_files(tmp_path / "step1" / "rank")
    step1_after = {p.name: p.read_bytes() for p in (tmp_path / "step1" / "rank" / "dump_tensor_data").iterdir()}
    assert step1_after == step1_before


def test_direct_file_never_writes_into_an_inode_another_name_shares(tmp_path, monkeypatch):
    for direct in (True, False):
        monkeypatch.setattr(direct_io, "_enabled", direct)
        original, other = tmp_path / f"a{direct}.bin", tmp_path / f"b{direct}.bin"
        original.write_bytes(b"old" * 5000)
        os.link(original, other)
        for capacity in (20_000, 10):  # assembled in the buffer, and spilled to a plain file
            with direct_io.DirectFile(str(original), capacity) as handle:
                handle.write(b"new" * 5000)
            assert original.read_bytes() == b"new" * 5000
            assert other.read_bytes() == b"old" * 5000
