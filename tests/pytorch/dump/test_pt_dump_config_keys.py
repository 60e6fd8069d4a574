"""Config keys that change how the PyTorch debugger runs: enable_dataloader and is_deterministic."""
import json

import pytest
import torch

from msprobe.pytorch import PrecisionDebugger
from pt_dump_helpers import MLP, load_rank, write_config


def _loader(batches=6):
    data = torch.utils.data.TensorDataset(torch.randn(batches * 2, 4, generator=torch.Generator().manual_seed(0)))
    return torch.utils.data.DataLoader(data, batch_size=2)


def test_enable_dataloader_dumps_the_configured_steps_and_ends_the_loop(tmp_path):
    from torch.utils.data.dataloader import _BaseDataLoaderIter

    original_next = _BaseDataLoaderIter.__dict__["__next__"]
    model = MLP()
    debugger = PrecisionDebugger(config_path=write_config(tmp_path, "statistics", "L1", step=[1, 2],
                                                          enable_dataloader=True), model=model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    seen = []
    for (x,) in _loader():  # no start/stop/step in the script
        seen.append(x)
        debugger.start()  # ignored: the DataLoader drives the steps
        model(x).sum().backward()
        opt.step()
        opt.zero_grad()
    assert len(seen) == 3  # steps 0, 1, 2; the loop ends after the last configured step
    assert list(_loader()) == []  # later loops end at once: training stops, as the config asks
    root = tmp_path / "dump"
    assert sorted(p.name for p in root.iterdir()) == ["step1", "step2"]  # written before the loop ended
    for step, batch in ((1, seen[1]), (2, seen[2])):
        data = load_rank(root, step=step)[0]["data"]
        assert data["Functional.linear.0.forward"]["input_args"][0]["Max"] == pytest.approx(batch.max().item())
        assert "Functional.linear.0.backward" in data
    assert torch._C._len_torch_function_stack() == 0
    debugger.close()
    assert _BaseDataLoaderIter.__dict__["__next__"] is original_next
    assert len(list(_loader())) == 6


def test_enable_dataloader_without_steps_dumps_every_batch_until_the_data_ends(tmp_path):
    model = MLP()
    debugger = PrecisionDebugger(config_path=write_config(tmp_path, "statistics", "L1", enable_dataloader=True),
                                 model=model)
    for _epoch in range(2):
        for (x,) in _loader(batches=2):
            model(x).sum().backward()
    debugger.close()
    root = tmp_path / "dump"
    assert sorted(p.name for p in root.iterdir()) == ["step0", "step1", "step2", "step3"]
    assert all("Functional.linear.1.backward" in load_rank(root, step=s)[0]["data"] for s in range(4))


def test_is_deterministic_turns_on_deterministic_algorithms(tmp_path):
    assert not torch.are_deterministic_algorithms_enabled()
    try:
        config = write_config(tmp_path, "statistics", "L1", is_deterministic=True)
        assert json.loads(open(config).read())["is_deterministic"] is True
        PrecisionDebugger(config_path=config).close()
        assert torch.are_deterministic_algorithms_enabled()
        assert torch.backends.cudnn.deterministic and not torch.backends.cudnn.benchmark
    finally:
        torch.use_deterministic_algorithms(False)
        torch.backends.cudnn.deterministic = False
    PrecisionDebugger(config_path=write_config(tmp_path, "statistics", "L1", is_deterministic=False)).close()
    assert not torch.are_deterministic_algorithms_enabled()
