"""The task registry is the one source of config.json sections: validation, the packaged config.json, the
reference in docs/config.md and `msprobe config --explain` all come from the tasks' declarations."""
import json
import os

import pytest

import msprobe
from msprobe.cli import main
from msprobe.core import config_reference
from msprobe.core.config import load_config, parse_config, task_names
from msprobe.core.config_fields import COMMON_FIELDS, Field, integer
from msprobe.core.dump import tasks
from msprobe.core.dump.tasks import Task, config_tasks, register_task, section_fields
from msprobe.core.errors import ConfigError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _read(*parts):
    with open(os.path.join(*parts), encoding="utf-8") as handle:
        return handle.read()


def test_packaged_config_json_is_generated_from_the_registry():
    text = config_reference.default_config_text()
    assert _read(os.path.dirname(msprobe.__file__), "config.json") == text
    assert _read(ROOT, "config.json") == text
    assert set(json.loads(text)) >= {"task", "dump_path", "statistics", "tensor", "overflow_check", "run_ut",
                                     "free_benchmark", "grad_probe"}


def test_docs_config_md_holds_the_generated_reference():
    docs = _read(ROOT, "docs", "config.md")
    assert config_reference.markdown_reference() in docs, "regenerate: msprobe -f pytorch config --markdown"
    for cls in config_tasks(shipped_only=True):
        for field in section_fields(cls.name):
            assert f"| `{field.name}` |" in docs


def test_every_default_passes_its_own_rule_and_every_section_validates_empty():
    for name in task_names():
        cfg = parse_config({"task": name, "level": "L1"})
        assert set(cfg.section) == {f.name for f in section_fields(name)}
        for field in section_fields(name):
            assert field.rule(field.name, cfg.section[field.name]) == field.default


def test_the_task_list_is_the_registry():
    assert task_names() == ("statistics", "tensor", "overflow_check", "run_ut", "free_benchmark", "grad_probe",
                            "flight_recorder")
    with pytest.raises(ConfigError, match="'flight_recorder'"):
        parse_config({"task": "online_run_ut"})  # selected by tensor.online_run_ut, not by name


def test_each_framework_debugger_gets_its_dump_tasks_from_the_registry():
    from msprobe.core.config import dump_task_names

    # flight_recorder runs on both (tests/mindspore/test_ms_debugger_base.py); online run_ut is PyTorch's only
    assert dump_task_names("mindspore") == ("statistics", "tensor", "overflow_check", "free_benchmark",
                                            "flight_recorder")
    assert dump_task_names("pytorch") == ("statistics", "tensor", "overflow_check", "free_benchmark",
                                          "flight_recorder")


def test_a_task_declares_its_level_rule():
    with pytest.raises(ConfigError, match="'level'.*'L1' for task free_benchmark"):
        parse_config({"task": "free_benchmark", "level": "L0"})


@pytest.fixture
def sampled_task(monkeypatch):
    """A task config.json does not know, added the way a new task module adds itself."""
    monkeypatch.setattr(tasks, "_REGISTRY", dict(tasks._REGISTRY))

    @register_task("every_nth")
    class EveryNth(Task):
        """task "every_nth": keeps one dumped call in `n`."""
        config_fields = COMMON_FIELDS + (Field("n", integer(1), 10, "keep one call in n"),)

        def __init__(self, collector):
            super().__init__(collector)
            self.seen = 0

        def admit(self, record):
            self.seen += 1
            return self.seen % self.config.section["n"] == 1
    return EveryNth


def test_a_new_task_brings_its_section_validation_and_reference(sampled_task, tmp_path):
    cfg = parse_config({"task": "every_nth", "every_nth": {"n": 3}, "dump_path": str(tmp_path)})
    assert cfg.section["n"] == 3 and cfg.section["data_mode"] == ["all"]
    assert parse_config({"task": "every_nth"}).section["n"] == 10
    with pytest.raises(ConfigError, match=r"'every_nth.n'; allowed: an integer >= 1"):
        parse_config({"task": "every_nth", "every_nth": {"n": 0}})
    with pytest.raises(ConfigError, match="unknown key"):
        parse_config({"task": "every_nth", "every_nth": {"m": 1}})
    text = config_reference.explain("every_nth")
    assert "keeps one dumped call in `n`" in text and "keep one call in n" in text
    # not shipped: the packaged file and the docs do not change because a test registered a task
    assert "every_nth" not in config_reference.default_config()


def test_a_new_task_dumps_through_the_collector(sampled_task, tmp_path):
    import glob

    import torch

    from msprobe.core.dump import DumpCollector
    from msprobe.pytorch.dump.adapter import TorchAdapter

    config_path = tmp_path / "config.json"
    config_path.write_text(json.dumps({"task": "every_nth", "dump_path": str(tmp_path / "dump"),
                                       "every_nth": {"n": 2}}))
    collector = DumpCollector(load_config(str(config_path), framework="pytorch"), TorchAdapter())
    collector.start()
    for _ in range(4):
        x = torch.ones(3)
        call = collector.begin_forward("Torch.relu", (x,), {})
        collector.end_forward(call, torch.relu(x))
    collector.stop()
    collector.close()
    [dump_json] = glob.glob(str(tmp_path / "dump" / "step0" / "*" / "dump.json"))
    assert sorted(json.loads(_read(dump_json))["data"]) == ["Torch.relu.0.forward", "Torch.relu.2.forward"]


def test_config_command_explains_a_task_from_its_docstring(capsys):
    assert main(["-f", "mindspore", "config", "--explain", "overflow_check"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("overflow_check\n") and "overflow_nums" in out and "an integer >= 1 or -1" in out
    assert "Dumping stops after `overflow_nums` such calls" in out
    assert main(["-f", "pytorch", "config", "--explain"]) == 0
    out = capsys.readouterr().out
    assert all(f"\n{name}" in "\n" + out for name in task_names())
    assert main(["-f", "pytorch", "config", "--explain", "no_such_task"]) == 1
    assert "[ERROR]" in capsys.readouterr().out


def test_config_command_prints_the_default_config(capsys):
    assert main(["-f", "pytorch", "config", "--default"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(config_reference.default_config_text())
