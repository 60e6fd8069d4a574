"""config.json validation: every field, ranges, overrides and precise error messages."""
import json

import pytest

from msprobe.core.config import expand_ranges, load_config, parse_config
from msprobe.core.errors import ConfigError, PathError


def test_packaged_default_config_loads_with_reference_defaults():
    cfg = load_config()
    assert (cfg.task, cfg.level, cfg.dump_path) == ("statistics", "L1", "./dump_path")
    assert cfg.data_mode == ["all"] and cfg.summary_mode == "statistics"
    assert cfg.step == [] and cfg.rank == [] and cfg.async_dump is False


@pytest.mark.parametrize("value, expected", [
    ([], []), ([3, 1], [1, 3]), ([0, "4-6"], [0, 4, 5, 6]), (["2-2", 2], [2]),
])
def test_step_and_rank_ranges_expand(value, expected):
    assert expand_ranges("step", value) == expected


@pytest.mark.parametrize("value", [["6-4"], [-1], ["a"], [True], "0-3", [1.5], ["1-2-3"]])
def test_bad_ranges_name_key_and_value(value):
    with pytest.raises(ConfigError) as info:
        parse_config({"step": value})
    assert "'step'" in str(info.value)


@pytest.mark.parametrize("raw, key", [
    ({"task": "dump"}, "'task'"),
    ({"level": "L3"}, "'level'"),
    ({"async_dump": "yes"}, "'async_dump'"),
    ({"statistics": {"summary_mode": "sha"}}, "statistics.summary_mode"),
    ({"statistics": {"data_mode": ["all", "input"]}}, "statistics.data_mode"),
    ({"statistics": {"data_mode": ["sideways"]}}, "statistics.data_mode"),
    ({"statistics": {"scope": ["only_one"]}}, "statistics.scope"),
    ({"statistics": {"list": "relu"}}, "statistics.list"),
    ({"tensor": {"file_format": "pt"}}, "tensor.file_format"),
    ({"overflow_check": {"overflow_nums": 0}}, "overflow_check.overflow_nums"),
    ({"overflow_check": {"check_mode": "none"}}, "overflow_check.check_mode"),
    ({"free_benchmark": {"pert_mode": "shake"}}, "free_benchmark.pert_mode"),
    ({"grad_probe": {"bounds": [1, 0]}}, "grad_probe.bounds"),
    ({"grad_probe": {"grad_level": "L9"}}, "grad_probe.grad_level"),
    ({"run_ut": {"white_list": [1]}}, "run_ut.white_list"),
])
def test_invalid_fields_report_key_value_and_allowed(raw, key):
    with pytest.raises(ConfigError) as info:
        parse_config(raw)
    message = str(info.value)
    assert key in message and "allowed" in message


def test_unknown_keys_are_rejected_with_known_list():
    with pytest.raises(ConfigError, match="unknown key"):
        parse_config({"levle": "L1"})
    with pytest.raises(ConfigError, match="unknown key"):
        parse_config({"statistics": {"scop": []}})


def test_task_section_is_flattened_and_overrides_win():
    cfg = parse_config({"task": "tensor", "level": "mix", "tensor": {"list": ["relu"], "data_mode": ["forward", "input"]}},
                       task="overflow_check", level="L0", dump_path="/tmp/x")
    assert (cfg.task, cfg.level, cfg.dump_path) == ("overflow_check", "L0", "/tmp/x")
    assert cfg.overflow_nums == 1 and cfg.list == []
    cfg = parse_config({"task": "tensor", "tensor": {"list": ["relu"], "data_mode": ["forward", "input"]}})
    assert cfg.list == ["relu"] and cfg.wants("forward", "input") and not cfg.wants("forward", "output")
    assert not cfg.wants("backward", "input")


def test_overflow_nums_minus_one_means_forever():
    assert parse_config({"task": "overflow_check", "overflow_check": {"overflow_nums": -1}}).overflow_nums == -1


def test_string_booleans_from_reference_docs_are_accepted():
    cfg = parse_config({"task": "free_benchmark", "free_benchmark": {"if_preheat": "true"}})
    assert cfg.section["if_preheat"] is True


def test_config_file_errors_name_the_file(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text('{"task": "statistics",')
    with pytest.raises(Exception) as info:
        load_config(str(bad))
    assert "config.json" in str(info.value) and "not valid JSON" in str(info.value)
    with pytest.raises(PathError, match="does not exist"):
        load_config(str(tmp_path / "missing.json"))


def test_config_file_round_trip(tmp_path):
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps({"task": "statistics", "dump_path": str(tmp_path), "step": ["0-1"],
                                "statistics": {"summary_mode": "md5"}}))
    cfg = load_config(str(path))
    assert cfg.step == [0, 1] and cfg.summary_mode == "md5"
