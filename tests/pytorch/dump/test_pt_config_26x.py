"""Config keys and start() arguments msprobe 26.x users bring: dump_enable (switched while training), risk_level,
statistics.tensor_list, start(token_range=..., rank_id=...); the 26.x keys and tasks without a counterpart are
refused in one line that says what to use instead."""
import json
import os

import pytest
import torch
import torch.nn as nn

from msprobe.cli import main
from msprobe.core.config import KEYS_26X, TASKS_26X, load_config
from msprobe.core.dump.risk import CORE_APIS, LOW_APIS, api_of
from msprobe.core.errors import ConfigError
from msprobe.pytorch import PrecisionDebugger
from pt_dump_helpers import load_rank, write_config


class Block(nn.Module):
    """A linear and a layer norm (CORE), a relu and a sum (FOCUS), a concatenation (LOW)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)
        self.norm = nn.LayerNorm(6)

    def forward(self, x):
        y = self.norm(self.fc(x)).view(-1, 3, 2)
        y = torch.relu(y).float()
        return torch.cat([y, y], dim=1).sum()


def _run(debugger, model, inputs, **start):
    debugger.start(model, **start)
    for x in inputs:
        model(x)
    debugger.stop()
    debugger.step()


def _bump(path, content):
    """Rewrite the config file so that its modification time surely changes (coarse clocks)."""
    before = os.stat(path).st_mtime_ns
    with open(path, "w") as handle:
        json.dump(content, handle)
    os.utime(path, ns=(before + 10**9, before + 10**9))


def test_dump_enable_switches_dumping_while_training(tmp_path):
    path = write_config(tmp_path, dump_enable=True)
    content = json.loads(open(path).read())
    model, x = Block(), torch.randn(2, 6)
    debugger = PrecisionDebugger(config_path=path)
    _run(debugger, model, [x])                          # step 0: on
    _bump(path, dict(content, dump_enable=False))
    _run(debugger, model, [x])                          # step 1: off
    _bump(path, dict(content, dump_enable=True, level="L0"))  # only dump_enable is re-read
    _run(debugger, model, [x])                          # step 2: on again, still L1
    with open(path, "w") as handle:
        handle.write('{"task": "statistics", "dump_en')  # half written: off, never the whole run
    os.utime(path, ns=(os.stat(path).st_mtime_ns + 2 * 10**9,) * 2)
    _run(debugger, model, [x])                          # step 3: off
    debugger.close()
    steps = sorted(os.listdir(tmp_path / "dump"))
    assert steps == ["step0", "step2"]
    assert set(load_rank(tmp_path / "dump", 2)[0]["data"]) == set(load_rank(tmp_path / "dump", 0)[0]["data"])
    # false from the start: nothing until the file says true
    (tmp_path / "off").mkdir()
    off = write_config(tmp_path / "off", dump_enable=False)
    debugger = PrecisionDebugger(config_path=off)
    _run(debugger, model, [x])
    debugger.close()
    assert not os.path.exists(tmp_path / "off" / "dump")


def test_without_dump_enable_the_file_is_read_once(tmp_path):
    path = write_config(tmp_path)
    debugger = PrecisionDebugger(config_path=path)
    assert debugger.switch is None
    _bump(path, dict(json.loads(open(path).read()), dump_enable=False))
    _run(debugger, Block(), [torch.randn(2, 6)])
    debugger.close()
    assert os.listdir(tmp_path / "dump") == ["step0"]


def _apis(tmp_path, risk_level):
    root = tmp_path / risk_level
    debugger = PrecisionDebugger(config_path=write_config(tmp_path, dump_path=str(root), risk_level=risk_level))
    _run(debugger, Block(), [torch.randn(2, 6)])
    debugger.close()
    return {name.rsplit(".", 2)[0] for name in load_rank(root)[0]["data"]}


def test_risk_level_keeps_the_apis_of_its_class(tmp_path):
    every = _apis(tmp_path, "ALL")
    apis = {api_of(name) for name in every}
    assert apis == {"linear", "layer_norm", "relu", "cat", "sum"}  # view and float are not APIs 1.2.1 dumps
    focus, core = _apis(tmp_path, "FOCUS"), _apis(tmp_path, "CORE")
    assert focus == {name for name in every if api_of(name) not in LOW_APIS}
    assert core == {name for name in every if api_of(name) in CORE_APIS}
    assert {api_of(name) for name in core} == {"linear", "layer_norm"}
    assert {api_of(name) for name in focus} == {"linear", "layer_norm", "relu", "sum"}  # cat joins: LOW
    with pytest.raises(ConfigError, match="risk_level"):
        load_config(write_config(tmp_path, risk_level="HIGH"))


def test_tensor_list_saves_the_tensors_of_the_calls_named(tmp_path):
    model, x = Block(), torch.randn(2, 6)
    debugger = PrecisionDebugger(config_path=write_config(tmp_path, section={"tensor_list": ["linear"]}))
    _run(debugger, model, [x])
    debugger.close()
    data = load_rank(tmp_path / "dump")[0]["data"]
    named = {name for name, entry in data.items() if "data_name" in json.dumps(entry)}
    assert named == {name for name in data if ".linear." in name}
    files = sorted(os.listdir(tmp_path / "dump" / "step0" / "rank" / "dump_tensor_data"))
    assert files and all(name.startswith("Functional.linear.0.") for name in files)
    saved = torch.load(tmp_path / "dump" / "step0" / "rank" / "dump_tensor_data" /
                       "Functional.linear.0.forward.input.0.pt")
    assert torch.equal(saved, x)
    assert data["Torch.relu.0.forward"]["output"][0]["Max"] == pytest.approx(
        torch.relu(model.norm(model.fc(x))).max().item(), rel=1e-6)


def test_token_range_dumps_only_those_forwards(tmp_path):
    model = Block()
    inputs = [torch.full((2, 6), float(i)) for i in range(5)]
    debugger = PrecisionDebugger(config_path=write_config(tmp_path, level="mix"))
    _run(debugger, model, inputs, token_range=[1, 2])
    debugger.close()
    data = load_rank(tmp_path / "dump")[0]["data"]
    linear_inputs = [data[name]["input_args"][0]["Max"] for name in sorted(data)
                     if name.startswith("Functional.linear.") and name.endswith(".forward")]
    assert linear_inputs == [1.0, 2.0]  # the 2nd and 3rd forwards (counted from 0), nothing else
    assert sorted(name for name in data if name.startswith("Module.") and ".forward." in name) == [
        "Module.fc.Linear.forward.0", "Module.fc.Linear.forward.1", "Module.norm.LayerNorm.forward.0",
        "Module.norm.LayerNorm.forward.1"]
    for bad in ([2, 1], [1], [-1, 3], "0-3"):
        with pytest.raises(ConfigError, match="token_range"):
            PrecisionDebugger(config_path=write_config(tmp_path)).start(model, token_range=bad)


def test_rank_id_names_the_rank_when_no_process_group_does(tmp_path):
    debugger = PrecisionDebugger(config_path=write_config(tmp_path, rank=[3]))
    _run(debugger, Block(), [torch.randn(2, 6)], rank_id=3)
    _run(debugger, Block(), [torch.randn(2, 6)], rank_id=1)  # filtered out by "rank": [3]
    debugger.close()
    assert os.listdir(tmp_path / "dump" / "step0") == ["rank3"] and not os.path.exists(tmp_path / "dump" / "step1")
    with pytest.raises(ConfigError, match="rank_id"):
        PrecisionDebugger(config_path=write_config(tmp_path)).start(rank_id=-1)


@pytest.mark.parametrize("key, value", [("precision", "high"), ("custom_op_namespaces", ["_C_ascend"]),
                                        ("load", {"path": "x", "modules": ["m"]}), ("extra_info", False)])
def test_26x_keys_without_counterpart_are_refused_in_one_line(tmp_path, key, value):
    with pytest.raises(ConfigError) as caught:
        load_config(write_config(tmp_path, **{key: value}))
    message = str(caught.value)
    assert f"'{key}'" in message and KEYS_26X[key] in message and "\n" not in message


def test_26x_tasks_are_refused_with_a_pointer_and_extra_info_true_is_accepted(tmp_path, capsys):
    for task in ("structure", "diff_check"):
        path = tmp_path / f"{task}.json"
        path.write_text(json.dumps({"task": task, "dump_path": str(tmp_path / "d"), "level": "L1"}))
        with pytest.raises(ConfigError, match=f"task '{task}'.*") as caught:
            load_config(str(path))
        assert TASKS_26X[task] in str(caught.value)
    assert load_config(write_config(tmp_path, extra_info=True, async_dump=False)).task == "statistics"
    # the reference names every one of them
    assert main(["config", "--explain"]) == 0
    text = capsys.readouterr().out
    for name in ("dump_enable", "risk_level", "tensor_list", "token_range", "rank_id", *KEYS_26X, *TASKS_26X):
        assert name in text.split("Keys and tasks of msprobe 26.x:")[1], name
