"""overflow_check on a real float16 model: the calls whose inputs or outputs hold inf/nan are kept (a call fed
inf is flagged too), overflow_nums is honoured, and tensors are copied and written only for the calls kept."""
import json
import math
import os

import torch
import torch.nn as nn

from core_dump_helpers import load_dump, tensor_descriptors
from msprobe.pytorch import PrecisionDebugger
from msprobe.pytorch.dump.adapter import TorchAdapter


class ExpNet(nn.Module):
    """float16: linear -> * 8 -> exp overflows (exp(x) > 65504 for x > 11.1) -> clamp (finite again: flagged
    for its input only) -> + 1 -> sum."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4, bias=False).half()
        with torch.no_grad():
            self.lin.weight.copy_(torch.eye(4, dtype=torch.float16) * 0.5)

    def forward(self, x):
        return (torch.clamp(torch.exp(self.lin(x) * 8), max=1000.0) + 1).sum()


INPUT = torch.tensor([[0.5, 1.0, 2.0, 4.0], [0.1, 0.2, 0.3, 0.4]],
                     dtype=torch.float16)  # exp(0.5 * 8 * x) overflows for 2.0 and 4.0


def _run(tmp_path, task, **options):
    model = ExpNet()
    config = tmp_path / f"{task}.json"
    config.write_text(json.dumps({"task": task, "dump_path": str(tmp_path / task), "level": "L1", task: options}))
    debugger = PrecisionDebugger(config_path=str(config), model=model)
    debugger.start()
    model(INPUT.clone().requires_grad_(True)).backward()
    debugger.stop()
    debugger.step()
    debugger.close()
    rank_dir = tmp_path / task / "step0" / "rank"
    return (load_dump(rank_dir)["data"] if (rank_dir / "dump.json").exists() else {}), rank_dir


def _non_finite(entry):
    return any(isinstance(d.get(k), float) and not math.isfinite(d[k])
               for d in tensor_descriptors(entry) for k in ("Max", "Min"))


def test_first_overflows_are_the_exp_and_the_call_fed_its_inf(tmp_path, monkeypatch):
    copies = []
    original = TorchAdapter.copy_for_save
    monkeypatch.setattr(TorchAdapter, "copy_for_save", lambda self, t: copies.append(1) or original(self, t))
    data, rank_dir = _run(tmp_path, "overflow_check", overflow_nums=2)
    assert list(data) == ["Torch.exp.0.forward", "Torch.clamp.0.forward"]
    exp_entry, clamp_entry = data["Torch.exp.0.forward"], data["Torch.clamp.0.forward"]
    assert exp_entry["output"][0]["Max"] == math.inf and math.isfinite(exp_entry["input_args"][0]["Max"])
    assert clamp_entry["input_args"][0]["Max"] == math.inf  # flagged for its input: its output is finite
    assert clamp_entry["output"][0]["Max"] == 1000.0
    files = sorted(os.listdir(rank_dir / "dump_tensor_data"))
    assert files == ["Torch.clamp.0.forward.input.0.pt", "Torch.clamp.0.forward.output.0.pt",
                     "Torch.exp.0.forward.input.0.pt", "Torch.exp.0.forward.output.0.pt"]
    exp_input = torch.load(rank_dir / "dump_tensor_data" / "Torch.exp.0.forward.input.0.pt", weights_only=True)
    assert torch.equal(exp_input, (INPUT @ (torch.eye(4, dtype=torch.float16) * 0.5)) * 8)
    assert len(copies) == 3  # exp's input and output, clamp's output (clamp's input is exp's output: a link)


def test_no_limit_keeps_exactly_the_calls_a_statistics_dump_shows_non_finite(tmp_path):
    statistics, _ = _run(tmp_path, "statistics")
    expected = [name for name, entry in statistics.items() if _non_finite(entry)]
    assert "Torch.exp.0.backward" in expected and "Torch.clamp.0.forward" in expected
    assert "Functional.linear.0.forward" not in expected and "Tensor.__add__.0.forward" not in expected
    data, rank_dir = _run(tmp_path, "overflow_check", overflow_nums=-1)
    assert list(data) == expected
    for name, entry in data.items():  # same statistics as the statistics dump, plus the file names
        stripped = [{k: v for k, v in d.items() if k != "data_name"} for d in tensor_descriptors(entry)]
        assert str(stripped) == str(list(tensor_descriptors(statistics[name])))
    named = {d["data_name"] for entry in data.values() for d in tensor_descriptors(entry) if "data_name" in d}
    assert named == set(os.listdir(rank_dir / "dump_tensor_data"))


def test_a_finite_run_copies_nothing_and_writes_nothing(tmp_path, monkeypatch):
    copies = []
    monkeypatch.setattr(TorchAdapter, "copy_for_save", lambda self, t: copies.append(1))
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    debugger = PrecisionDebugger(task="overflow_check", dump_path=str(tmp_path), level="L1", model=model)
    debugger.start()
    model(torch.randn(3, 4)).sum().backward()
    debugger.stop()
    debugger.close()
    assert copies == []
    assert not (tmp_path / "step0" / "rank" / "dump.json").exists()
