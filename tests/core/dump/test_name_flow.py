"""Names are structured all the way through the collect flow: the collector formats each entry name once,
the filters read the call's fields, and nothing parses a name back; tasks see a narrow TaskContext."""
import json

import pytest
import torch
import torch.nn as nn

from core_dump_helpers import api_call, load_dump
from msprobe.core import naming
from msprobe.core.config import parse_config
from msprobe.core.dump import DumpCollector
from msprobe.core.dump.collector import CollectorContext
from msprobe.core.dump.tasks import Task, TaskContext, register_task
from msprobe.pytorch import PrecisionDebugger
from msprobe.pytorch.dump.adapter import TorchAdapter


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 4)
        self.fc2 = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def _refuse(*_args, **_kwargs):
    raise AssertionError("a name was parsed back on the collect path")


@pytest.fixture
def no_parsing(monkeypatch):
    """Call it once the debugger is built: from then on every way naming.py turns a string back into parts
    fails the test (the config's names are parsed once, when the filter is built)."""
    def refuse_parsing():
        monkeypatch.setattr(naming.EntryName, "parse", classmethod(lambda cls, *a: _refuse()))
        for function in ("call_of", "parse_name", "parse_row_name", "backward_of"):
            monkeypatch.setattr(naming, function, _refuse)
    return refuse_parsing


def _dump(tmp_path, level, section, steps=1, collecting=lambda: None):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"task": "statistics", "dump_path": str(tmp_path / "dump"), "level": level,
                                  "statistics": section}))
    torch.manual_seed(0)
    model = Net()
    debugger = PrecisionDebugger(config_path=str(config), model=model)
    collecting()
    for _ in range(steps):
        debugger.start()
        model(torch.randn(3, 4)).sum().backward()
        debugger.stop()
        debugger.step()
    debugger.close()
    return tmp_path / "dump"


def test_scope_and_list_filters_and_module_parents_never_parse_a_name_back(tmp_path, no_parsing):
    section = {"list": ["relu", "Module.fc2.Linear.forward.0"]}
    root = _dump(tmp_path, "mix", section, steps=2, collecting=no_parsing)
    dump = load_dump(root / "step1" / "rank")
    assert set(dump["data"]) >= {"Torch.relu.0.forward", "Torch.relu.0.backward", "Module.fc2.Linear.forward.0",
                                 "Functional.linear.1.forward", "Module.fc2.Linear.backward.0"}
    assert "Functional.linear.0.forward" not in dump["data"]  # fc1's linear: outside the list
    construct = json.loads((root / "step1" / "rank" / "construct.json").read_text())
    assert construct["Functional.linear.1.forward"] == "Module.fc2.Linear.forward.0"
    assert construct["Functional.linear.1.backward"] == "Module.fc2.Linear.backward.0"


def test_scope_range_closes_at_the_end_module_without_parsing(tmp_path, no_parsing):
    section = {"scope": ["Module.fc1.Linear.forward.0", "Module.fc1.Linear.forward.0"]}
    root = _dump(tmp_path, "mix", section, collecting=no_parsing)
    forward = [n for n in load_dump(root / "step0" / "rank")["data"] if ".forward" in n]
    assert sorted(forward) == ["Functional.linear.0.forward", "Module.fc1.Linear.forward.0"]  # not relu, fc2


def test_a_call_carries_its_structured_name(tmp_path):
    config = parse_config({"task": "statistics", "dump_path": str(tmp_path), "level": "mix"})
    collector = DumpCollector(config, TorchAdapter())
    collector.start()
    module = collector.begin_forward("Module.blocks.0.Attention", (), {}, is_module=True)
    call = collector.begin_forward("Functional.linalg.vector_norm", (torch.ones(2),), {})
    assert call.entry_name == naming.EntryName("Functional", "linalg.vector_norm", "0", "forward", False)
    assert str(call.entry_name) == call.name == "Functional.linalg.vector_norm.0.forward"
    assert (call.call_name, call.api, call.backward_name) == (
        "Functional.linalg.vector_norm.0", "linalg.vector_norm", "Functional.linalg.vector_norm.0.backward")
    assert (call.parent, call.parent_backward) == ("Module.blocks.0.Attention.forward.0",
                                                   "Module.blocks.0.Attention.backward.0")
    assert module.entry_name == naming.EntryName.parse("Module.blocks.0.Attention.forward.0")
    collector.end_forward(call, torch.ones(()))
    collector.end_forward(module, None)
    collector.close()


def test_tasks_get_a_context_with_commit_save_resolve_finish_not_the_collector(tmp_path):
    seen = {}

    @register_task("test_context_probe")
    class Probe(Task):
        """Saves the output of every call whose output max is above 1, then ends the dump."""
        def tensor_seen(self, tensor, file_name, desc):
            self.sink.append((tensor, file_name, desc))

        def admit(self, record):
            seen["context"] = self.context
            self.context.resolve()  # statistics may still be pending
            output = record.entry.get("output") or [{}]
            if record.kind == "forward" and (output[0].get("Max") or 0) > 1:
                for tensor, file_name, desc in record.tensors:
                    desc["data_name"] = file_name
                    self.context.save(tensor, file_name)
                self.context.commit(record)
                self.context.finish("probe: found it")
            return False

    config = parse_config({"task": "statistics", "dump_path": str(tmp_path / "dump"), "level": "L1"})
    config.task = "test_context_probe"
    collector = DumpCollector(config, TorchAdapter())
    collector.start()
    api_call(collector, "Torch.mul", torch.mul, torch.full((2,), 0.5), 1.0)
    api_call(collector, "Torch.mul", torch.mul, torch.full((2,), 0.5), 4.0)
    api_call(collector, "Torch.mul", torch.mul, torch.full((2,), 0.5), 8.0)
    collector.close()
    context = seen["context"]
    assert isinstance(context, CollectorContext)
    assert not hasattr(context, "records") and not hasattr(context, "data") and not hasattr(context, "task")
    assert context.current_step == 0 and context.rank is None
    dump = load_dump(tmp_path / "dump" / "step0" / "rank")
    assert list(dump["data"]) == ["Torch.mul.1.forward"]  # the third call came after finish()
    assert dump["data"]["Torch.mul.1.forward"]["output"][0]["Max"] == 2.0
    saved = torch.load(tmp_path / "dump" / "step0" / "rank" / "dump_tensor_data"
                       / "Torch.mul.1.forward.output.0.pt")
    assert torch.equal(saved, torch.full((2,), 2.0))


def test_the_collector_context_satisfies_the_task_context_protocol():
    members = [name for name in vars(TaskContext) if not name.startswith("_")]
    assert set(members) >= {"current_step", "rank", "commit", "save", "resolve", "finish"}
    for name in ("current_step", "rank", "resolve"):
        assert hasattr(CollectorContext, name)
    for name in ("config", "adapter", "commit", "save", "finish"):
        assert name in CollectorContext.__slots__
