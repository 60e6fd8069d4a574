"""A full disk while dumping: training goes on, each kind of failure is logged once per step, stop()/close() say
what was not written, and a step's JSON files are written all or none."""
import errno
import os
import re

import pytest
import torch
import torch.nn as nn

from msprobe.core.dump import json_helper as helper_module
from msprobe.core.dump.json_helper import JsonHelper
from msprobe.pytorch import PrecisionDebugger

JSON_SET = {"dump.json", "stack.json", "construct.json"}


class FullDisk:
    """os.write / os.fsync on files under `root` fail with ENOSPC once `room` successful calls are used up."""

    def __init__(self, root, room):
        self.root, self.room = str(root), room
        self.real_write, self.real_fsync = os.write, os.fsync

    def _on_disk(self, fd):
        try:
            return os.readlink(f"/proc/self/fd/{fd}").startswith(self.root)
        except OSError:
            return False

    def _spend(self, fd):
        if self._on_disk(fd):
            if self.room <= 0:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            self.room -= 1

    def write(self, fd, data):
        self._spend(fd)
        return self.real_write(fd, data)

    def fsync(self, fd):
        self._spend(fd)
        return self.real_fsync(fd)


@pytest.fixture
def no_json_helper(monkeypatch):
    # the helper is another process: the injected failures must reach the writer thread's own writes
    monkeypatch.setenv("MSPROBE_JSON_HELPER", "0")
    monkeypatch.setattr(helper_module, "_HELPER", JsonHelper())


def _train(task, path, steps, disk=None, monkeypatch=None):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    debugger = PrecisionDebugger(task=task, dump_path=str(path), level="L1", model=model) if task else None
    if disk is not None:
        monkeypatch.setattr(os, "write", disk.write)
        monkeypatch.setattr(os, "fsync", disk.fsync)
    losses = []
    for _ in range(steps):
        if debugger:
            debugger.start()
        loss = model(torch.randn(5, 4)).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
        if debugger:
            debugger.stop()
            debugger.step()
    if debugger:
        debugger.close()
    monkeypatch.undo() if disk is not None else None
    return losses


def _json_sets(path, steps):
    sets = []
    for step in range(steps):
        folder = path / f"step{step}" / "rank"
        names = set(os.listdir(folder)) if folder.is_dir() else set()
        assert not [n for n in names if n.endswith(".tmp")], names  # no temporary file left behind
        sets.append(names & JSON_SET)
    return sets


def _error_lines(text):
    return [line for line in text.splitlines() if line.startswith("[ERROR]")]


def test_disk_full_in_the_middle_of_a_steps_json_files_leaves_the_whole_set_or_none(tmp_path, monkeypatch,
                                                                                   no_json_helper, capsys):
    # room for step 0's three JSON files (one write each: small files, no fsync) and one more: step 1 fails after
    # its first file
    losses = _train("statistics", tmp_path, 4, FullDisk(tmp_path, room=3 + 1), monkeypatch)
    assert losses == _train(None, tmp_path / "unused", 4)
    sets = _json_sets(tmp_path, 4)
    assert sets[0] == JSON_SET
    assert all(found in (set(), JSON_SET) for found in sets), sets
    assert sets[1:] == [set()] * 3
    errors = _error_lines(capsys.readouterr().out)
    assert len(errors) <= 2 * 3 + 1, errors  # per failed step: its failure and the report at the next stop
    assert "not written: 1 JSON file sets (step 3)" in errors[-1]


def test_disk_full_in_tensor_mode_logs_a_line_per_step_not_per_file(tmp_path, monkeypatch, no_json_helper, capsys):
    steps = 6
    losses = _train("tensor", tmp_path, steps, FullDisk(tmp_path, room=0), monkeypatch)
    assert losses == _train(None, tmp_path / "unused", steps)
    assert _json_sets(tmp_path, steps) == [set()] * steps
    assert [os.listdir(tmp_path / f"step{s}" / "rank" / "dump_tensor_data") for s in range(steps)] == [[]] * steps
    errors = _error_lines(capsys.readouterr().out)
    assert len(errors) <= 3 * steps, errors  # tensor files + JSON set per step, and the report at each stop
    not_written = sum(int(count) for count in re.findall(r"(\d+) tensor files", " ".join(
        line for line in errors if "not written" in line)))
    _train("tensor", tmp_path / "healthy", steps)
    expected = sum(len(os.listdir(tmp_path / "healthy" / f"step{s}" / "rank" / "dump_tensor_data"))
                   for s in range(steps))
    assert not_written == expected  # every file dump.json names, links included, is counted once
