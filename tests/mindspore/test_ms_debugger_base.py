"""The debugger lifecycle MindSpore shares with PyTorch (core/debugger_base.py): one active debugger (a new
one closes the previous, whichever framework), the whole dump task list (flight_recorder), auto-close after
the last step."""
import json
import os

import numpy as np
import pytest

from ms_test_helpers import fixed_input, load_dump, write_config


def _wrapped_apis():
    from msprobe.mindspore.dump.api_registry import api_targets
    return [getattr(owner, name) for owner, name, _, _ in api_targets()]


def _ms_debugger(directory, **config):
    from msprobe.mindspore import PrecisionDebugger
    os.makedirs(directory, exist_ok=True)
    path, dump_path = write_config(directory, **config)
    return PrecisionDebugger(config_path=path), dump_path


def test_a_new_debugger_closes_the_previous_one(ms, tmp_path, capsys):
    from mindspore import Tensor
    from ms_models import Net
    from msprobe.mindspore import PrecisionDebugger
    net, x = Net(), Tensor(fixed_input())
    before = _wrapped_apis()
    first, first_dump = _ms_debugger(tmp_path / "a", task="statistics", level="L1")
    first.start(net)
    net(x)
    assert _wrapped_apis() != before
    second, second_dump = _ms_debugger(tmp_path / "b", task="statistics", level="L1")
    # the first one's window is closed: its hooks are off and its step's files are written
    assert "replaces the previous one" in capsys.readouterr().out
    assert first.session is None and _wrapped_apis() == before
    dump, _, _ = load_dump(first_dump)
    assert "MintFunctional.relu.0.forward" in dump["data"]
    assert PrecisionDebugger.active() is second
    second.start(net)
    net(x)
    second.stop()
    second.close()
    assert PrecisionDebugger.active() is None
    assert load_dump(second_dump)[0]["data"].keys() == dump["data"].keys()


def test_the_one_active_debugger_rule_holds_across_frameworks(ms, tmp_path):
    import torch
    from mindspore import Tensor
    from ms_models import Net
    from msprobe.mindspore import PrecisionDebugger as MsDebugger
    from msprobe.pytorch import PrecisionDebugger as TorchDebugger
    config = tmp_path / "pt.json"
    config.write_text(json.dumps({"task": "statistics", "level": "L1", "dump_path": str(tmp_path / "pt")}))
    torch_debugger = TorchDebugger(config_path=str(config))
    torch_debugger.start()
    torch.relu(torch.tensor([-1.0, 2.0]))
    ms_debugger, ms_dump = _ms_debugger(tmp_path / "ms", task="statistics", level="L1")
    assert torch_debugger.session is None  # closed by the new debugger, its dump written
    written = json.loads((tmp_path / "pt" / "step0" / "rank" / "dump.json").read_text())["data"]
    assert "Torch.relu.0.forward" in written
    assert TorchDebugger.active() is None and MsDebugger.active() is ms_debugger
    TorchDebugger.save(torch.ones(2), "not_mine")  # the active debugger is MindSpore's: nothing happens
    net = Net()
    with ms_debugger.collect(net):
        net(Tensor(fixed_input()))
    ms_debugger.close()
    assert "debug.json" not in os.listdir(os.path.join(ms_dump, "step0", "rank"))


def _exp_chain(x):
    """x * 2 is finite, exp of it overflows float32 (producer), inf - inf is nan (propagator)."""
    from mindspore import mint
    h = x * 2
    big = mint.exp(h)
    return big - big


def test_flight_recorder_runs_on_mindspore(ms, tmp_path):
    from mindspore import Tensor
    values = np.array([1.0, 30.0, 50.0], np.float32)  # exp(100) > float32 max
    debugger, dump_path = _ms_debugger(tmp_path, task="flight_recorder", level="L1",
                                       flight_recorder={"depth": 2, "save_tensors": True})
    for data in (np.array([1.0, 2.0, 3.0], np.float32), values):  # step 0 stays finite: nothing written
        debugger.start()
        _exp_chain(Tensor(data))
        debugger.stop()
        debugger.step()
    debugger.close()
    assert not os.path.exists(os.path.join(dump_path, "step0"))
    dump, _, _ = load_dump(dump_path, step=1)
    names = list(dump["data"])
    assert len(names) == 2 and "exp" in names[1]  # the call before the exp, then the exp; nothing after
    mul = dump["data"][names[0]]
    assert mul["output"][0]["Max"] == pytest.approx(100.0)
    saved = os.path.join(dump_path, "step1", "rank", "dump_tensor_data", mul["output"][0]["data_name"])
    np.testing.assert_array_equal(np.load(saved), values * 2)
    with open(os.path.join(dump_path, "step1", "rank", "nan_origin.json")) as handle:
        assert json.load(handle)["first_producer"] == names[1]


def test_the_debugger_closes_itself_after_the_last_step(ms, tmp_path):
    from mindspore import Tensor
    from ms_models import Net
    from msprobe.mindspore import PrecisionDebugger
    net = Net()
    debugger, dump_path = _ms_debugger(tmp_path, task="statistics", level="L1", step=[0])
    with debugger.collect(net):
        net(Tensor(fixed_input()))
    debugger.step()
    assert PrecisionDebugger.active() is None  # closed: every file of step 0 is on disk now
    assert "MintFunctional.relu.0.forward" in load_dump(dump_path)[0]["data"]
    before = _wrapped_apis()
    debugger.start(net)  # steps after the last one: nothing installed
    assert _wrapped_apis() == before and debugger.session is None
