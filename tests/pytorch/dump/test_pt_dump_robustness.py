"""Hooks never change training, survive awkward tensors and ops, and leave nothing behind."""
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F

from msprobe.pytorch import PrecisionDebugger
from pt_dump_helpers import MLP, ConvNet, TinyTransformer, load_rank, train, write_config


def _state(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


@pytest.mark.parametrize("model_cls,task,level", [
    (MLP, "statistics", "L1"), (TinyTransformer, "statistics", "mix"), (ConvNet, "tensor", "L0"),
    (TinyTransformer, "tensor", "L1"), (ConvNet, "statistics", "mix"), (MLP, "overflow_check", "L1"),
])
def test_training_is_bit_identical_with_and_without_debugger(tmp_path, model_cls, task, level):
    torch.manual_seed(0)
    plain = model_cls()
    torch.manual_seed(0)
    dumped = model_cls()
    plain_losses = train(plain, steps=2)
    debugger = PrecisionDebugger(config_path=write_config(tmp_path, task, level), model=dumped)
    dumped_losses = train(dumped, debugger, steps=2)
    debugger.close()
    assert plain_losses == dumped_losses
    for key, value in _state(plain).items():
        assert torch.equal(value, _state(dumped)[key]), key


def test_stop_removes_every_hook(tmp_path):
    model = TinyTransformer()
    import torch.distributed as dist
    all_reduce = dist.all_reduce
    debugger = PrecisionDebugger(config_path=write_config(tmp_path, "statistics", "mix"), model=model)
    debugger.start()
    assert torch._C._len_torch_function_stack() == 1
    assert dist.all_reduce is not all_reduce
    model(torch.randint(0, 20, (1, 3))).sum().backward()
    debugger.stop()
    assert torch._C._len_torch_function_stack() == 0
    assert dist.all_reduce is all_reduce
    for module in model.modules():
        assert not module._forward_pre_hooks and not module._forward_hooks
        for param in module.parameters(recurse=False):
            assert not param._post_accumulate_grad_hooks
    out = model(torch.randint(0, 20, (1, 3)))  # after stop: not recorded
    out.sum().backward()
    debugger.close()
    dump, _, _ = load_rank(tmp_path / "dump")
    assert sum(1 for name in dump["data"] if name.startswith("Functional.embedding")) == 2  # fwd + bwd once


def test_setup_order_does_not_matter(tmp_path):
    """Optimizer, model and data created after the debugger (the reference crashes here)."""
    debugger = PrecisionDebugger(config_path=write_config(tmp_path, "statistics", "L1"))
    model = MLP()
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(6, 4)), batch_size=3)
    opt = torch.optim.Adam(model.parameters())
    for (x,) in loader:
        debugger.start()
        model(x).sum().backward()
        opt.step()
        debugger.stop()
        debugger.step()
    debugger.close()
    dump, _, _ = load_rank(tmp_path / "dump", step=1)
    assert "Functional.linear.0.forward" in dump["data"] and "Functional.linear.1.backward" in dump["data"]


def test_awkward_tensors_and_ops(tmp_path):
    debugger = PrecisionDebugger(config_path=write_config(tmp_path, "tensor", "L1"))
    debugger.start()
    x = torch.randn(4, 3, requires_grad=True)
    y = F.linear(x, torch.randn(5, 3, requires_grad=True))
    view = y[:, :2]                  # view of an output, then in-place on it
    view.mul_(2)
    view.relu_()
    values, indices = torch.max(y, dim=1)              # namedtuple with an integer tensor
    parts = torch.split(y, 2, dim=1)                   # tuple output
    z = torch.complex(y, y).abs()                      # complex intermediate
    empty = torch.zeros(0, 3) + 1                      # empty tensor
    scalar = y.sum()                                   # 0-d
    ints = torch.arange(5) * 2                         # integer
    with torch.no_grad():
        y.clone().add_(1)
    loss = values.sum() + parts[0].sum() + z.sum() + scalar + empty.sum() + ints.sum()
    loss.backward()
    debugger.stop()
    debugger.close()
    dump, _, _ = load_rank(tmp_path / "dump")
    data = dump["data"]
    assert data["Torch.max.0.forward"]["output"][1]["dtype"] == "torch.int64"
    assert data["Tensor.__getitem__.0.forward"]["input_args"][1][1] == {"type": "slice", "value": [None, 2, None]}
    assert data["Torch.complex.0.forward"]["output"][0]["dtype"] == "torch.complex64"
    outputs = [e["output"][0] for e in data.values() if e.get("output") and isinstance(e["output"][0], dict)]
    empty_out = [o for o in outputs if o.get("shape") == [0, 3]]
    assert empty_out and all(o["Max"] is None and o["Norm"] is None for o in empty_out)
    int_out = [o for o in outputs if o.get("dtype") == "torch.int64" and o.get("shape") == [5]]
    assert any(o["Max"] == 8.0 and o["Min"] == 0.0 and o["Mean"] == 4.0 for o in int_out)
    assert "Tensor.mul_.0.forward" in data and "Functional.linear.0.backward" in data
    assert x.grad is not None


def test_filtered_out_step_installs_nothing(tmp_path):
    debugger = PrecisionDebugger(config_path=write_config(tmp_path, "statistics", "L1", step=[1]))
    debugger.start()
    assert torch._C._len_torch_function_stack() == 0 and debugger.session is None
    debugger.stop()
    debugger.step()
    debugger.start()
    assert torch._C._len_torch_function_stack() == 1
    debugger.stop()
    debugger.close()
    assert not (tmp_path / "dump" / "step0").exists()


CRASH_SCRIPT = textwrap.dedent("""
    import json, sys, torch
    from msprobe.pytorch import PrecisionDebugger
    cfg = {"task": "tensor", "dump_path": sys.argv[1], "level": "L1", "async_dump": True, "tensor": {}}
    json.dump(cfg, open(sys.argv[1] + ".json", "w"))
    debugger = PrecisionDebugger(config_path=sys.argv[1] + ".json")
    model = torch.nn.Linear(4, 2)
    for step in range(3):
        debugger.start()
        loss = model(torch.randn(2, 4)).sum()
        loss.backward()
        if step == 2:
            raise RuntimeError("training died")
        debugger.stop()
        debugger.step()
""")


def test_completed_steps_survive_a_crash(tmp_path):
    script = tmp_path / "crash.py"
    script.write_text(CRASH_SCRIPT)
    root = tmp_path / "dump"
    proc = subprocess.run([sys.executable, str(script), str(root)], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "training died" in proc.stderr
    for step in (0, 1):
        dump, stack, construct = load_rank(root, step=step)
        names = set(dump["data"])
        assert {"Functional.linear.0.forward", "Functional.linear.0.backward"} <= names
        files = {d for d in (root / f"step{step}" / "rank" / "dump_tensor_data").iterdir()}
        assert len(files) == 11  # linear: 4 fwd + 3 bwd, sum: 2 fwd + 2 bwd
    assert not list(root.rglob(".tmp_*"))
    partial, _, _ = load_rank(root, step=2)  # the step that died keeps what it had collected
    assert "Functional.linear.0.forward" in partial["data"]


def test_a_module_that_raises_does_not_become_the_parent_of_later_calls(tmp_path):
    class Fails(torch.nn.Module):
        def forward(self, x):
            raise ValueError("bad input")

    model = torch.nn.Sequential(Fails(), torch.nn.Linear(2, 2))
    debugger = PrecisionDebugger(config_path=write_config(tmp_path, "statistics", "mix"), model=model)
    debugger.start()
    with pytest.raises(ValueError):
        model[0](torch.ones(1, 2))
    model[1](torch.ones(1, 2))
    try:
        raise KeyError("handled by the user")
    except KeyError:
        model[1](torch.ones(1, 2))  # a call inside an except block is still recorded
    debugger.stop()
    debugger.close()
    dump, _, construct = load_rank(tmp_path / "dump")
    assert "Module.0.Fails.forward.0" not in dump["data"]
    assert construct["Module.1.Linear.forward.0"] is None
    assert construct["Functional.linear.0.forward"] == "Module.1.Linear.forward.0"
    assert "Module.1.Linear.forward.1" in dump["data"]


@pytest.mark.parametrize("level", ["L1", "mix"])
def test_a_failing_dump_never_breaks_training(tmp_path, monkeypatch, level):
    from msprobe.pytorch.dump.adapter import TorchAdapter

    def broken(self, tensor, *_):
        raise RuntimeError("statistics exploded")

    torch.manual_seed(0)
    plain = TinyTransformer()
    torch.manual_seed(0)
    dumped = TinyTransformer()
    plain_losses = train(plain, steps=2)
    monkeypatch.setattr(TorchAdapter, "tensor_stats", broken)
    monkeypatch.setattr(TorchAdapter, "tensor_digest", broken)  # the fused path of a tensor's first sight
    debugger = PrecisionDebugger(config_path=write_config(tmp_path, "statistics", level), model=dumped)
    dumped_losses = train(dumped, debugger, steps=2)
    debugger.close()
    assert plain_losses == dumped_losses
    failed = debugger.collector.guard.failed
    assert "Functional.linear" in failed
    assert (level == "mix") == any(key.startswith("Module.") for key in failed)


def test_numpy_scalar_arguments_are_dumped_as_numbers(tmp_path, monkeypatch):
    """`scores * (1 / np.sqrt(d))` passes a numpy float64 (a float subclass); the JSON helper's marshal
    transport turned it into bytes and the whole step's JSON files were lost. It is dumped as a number."""
    import numpy as np

    monkeypatch.setenv("MSPROBE_JSON_HELPER", "1")
    torch.manual_seed(0)
    x = torch.randn(3, 4)
    debugger = PrecisionDebugger(config_path=write_config(tmp_path, "statistics", "L1"))
    debugger.start()
    y = torch.mul(x, np.float64(0.25))
    debugger.stop()
    debugger.step()
    debugger.close()
    data = load_rank(tmp_path / "dump")[0]["data"]
    scalar = data["Torch.mul.0.forward"]["input_args"][1]
    assert scalar["value"] == 0.25 and type(scalar["value"]) is float, scalar
    assert torch.equal(y, x * 0.25)
