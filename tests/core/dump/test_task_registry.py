"""The task registry: a new task is a new entry (a flight recorder that keeps the last records and writes them
only when a non-finite value appears; a task that replaces a call's output), never a branch in the collector."""
import collections

import torch

from core_dump_helpers import api_call, load_dump, make_collector
from msprobe.core.config import load_config
from msprobe.core.dump import DumpCollector
from msprobe.core.dump.stats import has_non_finite
from msprobe.core.dump.tasks import Task, register_task, registered_tasks
from msprobe.pytorch.dump.adapter import TorchAdapter


@register_task("test_flight_recorder")
class FlightRecorder(Task):
    """Keeps the last `depth` records; commits them only when a non-finite value appears."""

    def __init__(self, collector):
        super().__init__(collector)
        self.ring = collections.deque(maxlen=collector.config.section.get("depth", 3))

    def admit(self, record):
        self.ring.append(record)
        if has_non_finite(record.entry):
            for held in self.ring:
                self.collector.commit(held)
            self.ring.clear()
        return False


@register_task("test_fix_outputs")
class FixOutputs(Task):
    """Sees inputs before and outputs after each call; replaces outputs above 1 by 1."""

    def __init__(self, collector):
        super().__init__(collector)
        self.inputs_seen = []

    def before_call(self, call, args, kwargs):
        self.inputs_seen.append((call.name, [tuple(a.shape) for a in args if isinstance(a, torch.Tensor)]))

    def after_call(self, call, output):
        return output.clamp(max=1.0)


def _collector(tmp_path, task, **section):
    config = load_config(None, framework="pytorch", task="statistics", dump_path=str(tmp_path), level="L1")
    config.task, config.section = task, section  # a task config.json does not know yet
    return DumpCollector(config, TorchAdapter())


def test_builtin_tasks_are_registered():
    assert {"statistics", "tensor", "overflow_check"} <= set(registered_tasks())


def test_a_flight_recorder_writes_the_records_before_the_first_non_finite_value(tmp_path):
    collector = _collector(tmp_path, "test_flight_recorder", depth=3)
    collector.start()
    x = torch.full((4,), 2.0)
    for _ in range(6):
        x = api_call(collector, "Torch.mul", torch.mul, x, 10.0)  # 2e6 after 6 steps
    api_call(collector, "Torch.exp", torch.exp, x)  # inf
    for _ in range(2):
        api_call(collector, "Torch.neg", torch.neg, x)
    collector.stop()
    collector.close()
    data = load_dump(tmp_path / "step0" / "rank")["data"]
    assert list(data) == ["Torch.mul.4.forward", "Torch.mul.5.forward", "Torch.exp.0.forward"]
    assert data["Torch.mul.5.forward"]["output"][0]["Max"] == 2e6


def test_a_task_sees_inputs_before_and_may_replace_outputs(tmp_path):
    collector = _collector(tmp_path, "test_fix_outputs")
    collector.start()
    out = api_call(collector, "Torch.mul", torch.mul, torch.arange(4.0), 2.0)
    collector.stop()
    collector.close()
    assert out.tolist() == [0.0, 1.0, 1.0, 1.0]  # what the user's code received
    assert collector.task.inputs_seen == [("Torch.mul.0.forward", [(4,)])]
    entry = load_dump(tmp_path / "step0" / "rank")["data"]["Torch.mul.0.forward"]
    assert entry["output"][0]["Max"] == 1.0 and entry["input_args"][0]["Max"] == 3.0


def test_async_dump_says_it_has_no_effect(tmp_path, capsys):
    collector = make_collector(tmp_path, task="statistics", async_dump=True)
    collector.close()
    warnings = [line for line in capsys.readouterr().out.splitlines() if "async_dump" in line]
    assert len(warnings) == 1 and "no effect" in warnings[0]
