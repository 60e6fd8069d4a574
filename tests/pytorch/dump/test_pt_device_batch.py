"""The batched device path (msprobe/pytorch/dump/device_batch.py), forced onto CPU tensors (MSPROBE_DEVICE_PATH=1):
few framework ops per dumped tensor, and the host path's statistics and fingerprints."""
import collections
import json
import math

import pytest
import torch
import torch.nn as nn
from torch.utils._python_dispatch import TorchDispatchMode

from msprobe.pytorch import PrecisionDebugger
from msprobe.pytorch.dump import device_batch
from msprobe.pytorch.dump.adapter import TorchAdapter
from msprobe.pytorch.dump.device_batch import Slot
from tests.pytorch.dump.hf_models import VOCAB, tiny_gpt2, tiny_llama
from tests.pytorch.dump.pt_dump_helpers import load_rank, tensor_descriptors


class CountOps(TorchDispatchMode):
    """Counts every ATen op dispatched while it is active (ops run inside another mode's handler included)."""

    def __init__(self):
        super().__init__()
        self.ops = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[str(func)] += 1
        return func(*args, **(kwargs or {}))


class InPlaceNet(nn.Module):
    """Tensors changed in place after the calls that saw them, views (transpose, slice, negative bit), a 0-d."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.act = nn.ReLU(inplace=True)

    def forward(self, x):
        y = self.lin(x)
        z = y * 2
        z.add_(1.0)  # z was the output of mul: its recorded values are those before add_
        self.act(z)  # relu in place
        t = z.t()
        part = t[1::2]
        w = torch.matmul(part, z[:, :3])
        w.mul_(0.5)
        s = (w.sum() + torch.neg(part).mean())
        buffer = y.detach().clone()  # (not zeros_like: at L2 its empty_like shows uninitialised memory)
        buffer.copy_(y * 3)  # the clone recorded, then overwritten
        buffer[0].fill_(3.0)
        return s + buffer.half().float().sum()


def _config(tmp_path, level, summary, name):
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"task": "statistics", "dump_path": str(tmp_path / name), "level": level,
                                "statistics": {"summary_mode": summary}}))
    return str(path)


def _step(model, batch, debugger=None):
    if debugger is not None:
        debugger.start()
    out = model(batch) if not isinstance(batch, dict) else model(**batch).loss
    loss = out if out.dim() == 0 else out.float().pow(2).mean()
    loss.backward()
    if debugger is not None:
        debugger.stop()
        debugger.step()
    model.zero_grad()


def _dump(tmp_path, monkeypatch, make, batch, level, summary, forced):
    if forced:
        monkeypatch.setenv("MSPROBE_DEVICE_PATH", "1")
    else:
        monkeypatch.delenv("MSPROBE_DEVICE_PATH", raising=False)
    torch.manual_seed(0)
    model = make()
    name = f"{'device' if forced else 'host'}_{level}_{summary}"
    debugger = PrecisionDebugger(config_path=_config(tmp_path, level, summary, name), model=model)
    staged = []
    stage = device_batch.DeviceBatches.stage
    monkeypatch.setattr(device_batch.DeviceBatches, "stage", lambda self, *a: staged.append(1) or stage(self, *a))
    _step(model, batch, debugger)
    debugger.close()
    monkeypatch.setattr(device_batch.DeviceBatches, "stage", stage)
    assert bool(staged) is forced
    return load_rank(tmp_path / name)[0]["data"]


def _llama_batch():
    ids = torch.randint(0, VOCAB, (2, 8), generator=torch.Generator().manual_seed(1))
    return {"input_ids": ids, "labels": ids}


def _uninitialised_left_out(data):
    """The data with the descriptors of uninitialised memory left out: autograd's `new_empty_strided` / `empty`
    outputs, and the destination of each `copy_` before the copy (its input 0). Nothing else is left out."""
    kept = {}
    for name, entry in data.items():
        entry = dict(entry)
        if name.startswith(("Aten.new_empty_strided.", "Aten.empty", "Aten.new_empty.")):
            entry["output"] = None
        elif name.startswith("Aten.copy_."):
            entry["input_args"] = [None] + list(entry["input_args"][1:])
        kept[name] = entry
    return kept


def _assert_same(device_data, host_data, host_again=None):
    assert device_data.keys() == host_data.keys()
    if host_again is not None:  # at L2, what uninitialised memory holds is not comparable; all the rest is
        device_data, host_data, host_again = (_uninitialised_left_out(data) for data in (device_data, host_data,
                                                                                         host_again))
        unstable = [name for name in host_data if json.dumps(host_data[name]) != json.dumps(host_again[name])]
        assert not unstable, unstable
    device, host = tensor_descriptors(device_data), tensor_descriptors(host_data)
    assert len(device) == len(host) > 0
    fingerprints = 0
    for got, expected in zip(device, host):
        assert (got["dtype"], got["shape"]) == (expected["dtype"], expected["shape"])
        for key in ("Max", "Min", "Mean", "Norm"):
            a, b = got[key], expected[key]
            if isinstance(b, float) and math.isnan(b):
                assert isinstance(a, float) and math.isnan(a)
            elif isinstance(b, float) and not isinstance(b, bool):
                # Mean/Norm: float32 results of sums in another order (the host kernel: float32 blocks; here float64),
                # so a Mean near zero differs by the rounding of the terms' magnitude, not its own
                scale = max(abs(expected["Max"]), abs(expected["Min"]))
                assert a == pytest.approx(b, rel=2e-6, abs=2e-6 * scale), (key, got, expected)
            else:
                assert a == b, (key, got, expected)
        if "xor" in expected:
            assert got["xor"] == expected["xor"], (got, expected)  # bit-identical
            fingerprints += 1
    return fingerprints


@pytest.mark.parametrize("level,summary", [("L1", "statistics"), ("L1", "xor"), ("L2", "xor")])
def test_device_path_dispatches_at_most_one_and_a_half_ops_per_dumped_tensor(tmp_path, monkeypatch, level, summary):
    # the model's own ops are counted without the dump (the same before and after) and subtracted; before the
    # batched path the forced device path dispatched 3.4 (statistics L1), 9.6 (xor L1) and 5.5 (xor L2)
    monkeypatch.setenv("MSPROBE_DEVICE_PATH", "1")
    torch.manual_seed(0)
    model, batch = tiny_llama(), _llama_batch()
    with CountOps() as plain:
        _step(model, batch)
    debugger = PrecisionDebugger(config_path=_config(tmp_path, level, summary, "dump"), model=model)
    with CountOps() as dumped:
        _step(model, batch, debugger)
    with CountOps() as plain_again:
        _step(model, batch)
    debugger.close()
    assert sum(plain.ops.values()) == sum(plain_again.ops.values())
    tensors = len(tensor_descriptors(load_rank(tmp_path / "dump")[0]["data"]))
    extra = sum(dumped.ops.values()) - sum(plain.ops.values())
    assert dumped.ops["aten.as_strided.default"] > tensors // 4  # the staged path was taken
    assert tensors > 400 and extra / tensors <= 1.5, (extra, tensors, (dumped.ops - plain.ops).most_common(8))


@pytest.mark.parametrize("make,batch", [(tiny_llama, _llama_batch), (tiny_gpt2, _llama_batch),
                                        (InPlaceNet, lambda: torch.randn(4, 8, generator=torch.Generator().manual_seed(2)))])
@pytest.mark.parametrize("level", ["L1", "L2"])
def test_device_path_equals_the_host_path(tmp_path, monkeypatch, make, batch, level):
    # every descriptor: Max/Min equal, Mean/Norm to float32 rounding, fingerprints bit for bit; InPlaceNet changes
    # tensors in place after the calls that saw them (the staged copy keeps the values of the call)
    if make is tiny_gpt2:
        make = lambda: tiny_gpt2(dropout=0.0)  # noqa: E731  (the same values with and without the dump)
    device = _dump(tmp_path, monkeypatch, make, batch(), level, "xor", True)
    host = _dump(tmp_path, monkeypatch, make, batch(), level, "xor", False)
    (tmp_path / "again").mkdir()
    again = _dump(tmp_path / "again", monkeypatch, make, batch(), level, "xor", False) if level == "L2" else None
    assert _assert_same(device, host, again) > 50


def test_full_staging_buffers_are_reduced_mid_step_and_large_tensors_go_alone(tmp_path, monkeypatch):
    # a 4 KiB buffer: many reductions in one step; tensors over 1 KiB take the per-tensor device reductions
    monkeypatch.setattr(device_batch, "STAGE_BYTES", 4096)
    device = _dump(tmp_path, monkeypatch, tiny_llama, _llama_batch(), "L1", "xor", True)
    host = _dump(tmp_path, monkeypatch, tiny_llama, _llama_batch(), "L1", "xor", False)
    assert _assert_same(device, host) > 50


def test_a_tensor_changed_after_staging_keeps_its_recorded_values(monkeypatch):
    monkeypatch.setenv("MSPROBE_DEVICE_PATH", "1")
    adapter = TorchAdapter()
    tensor = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    stats, fingerprint, _ = adapter.tensor_digest(tensor, True, False)
    expected = TorchAdapter.fingerprint(_host_adapter(monkeypatch), tensor.clone())
    tensor.mul_(-1)  # later in the step; and a freed tensor's memory reused
    del tensor
    assert type(stats) is Slot
    assert adapter.resolve_stats([stats]) == [(5.0, 0.0, 2.5, pytest.approx(math.sqrt(55), rel=1e-7))]
    assert adapter.resolve_fingerprints([fingerprint]) == [expected]


def _host_adapter(monkeypatch):
    monkeypatch.delenv("MSPROBE_DEVICE_PATH")
    adapter = TorchAdapter()
    monkeypatch.setenv("MSPROBE_DEVICE_PATH", "1")
    return adapter
