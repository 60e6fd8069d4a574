"""config.json validation: every field, ranges, overrides and precise error messages."""
import json
import time

import pytest

from msprobe.core.config import expand_ranges, load_config, parse_config
from msprobe.core.errors import ConfigError, ParseError, PathError


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


# -- ranges stay intervals -----------------------------------------------------------------------------
def test_huge_step_ranges_are_intervals_not_lists():
    start = time.perf_counter()
    cfg = parse_config({"step": ["0-20000000", 30000000], "rank": ["0-4000000000"]})
    assert time.perf_counter() - start < 0.05  # was 7.9 s and 1.6 GB for the step list
    assert 0 in cfg.step and 20000000 in cfg.step and 20000001 not in cfg.step and 30000000 in cfg.step
    assert (len(cfg.step), cfg.step.min(), cfg.step.max(), bool(cfg.step)) == (20000002, 0, 30000000, True)
    assert 3999999999 in cfg.rank and -1 not in cfg.step and "3" not in cfg.step
    with pytest.raises(ConfigError, match="too many to list") as info:
        list(cfg.step)
    assert "\n" not in str(info.value)


def test_small_ranges_still_behave_like_the_old_lists():
    cfg = parse_config({"step": [5, "0-2", "2-3"]})
    assert cfg.step == [0, 1, 2, 3, 5] and list(cfg.step) == [0, 1, 2, 3, 5] and max(cfg.step) == 5
    assert cfg.step[0] == 0 and cfg.step[1:] + [None] == [1, 2, 3, 5, None] and repr(cfg.step) == "['0-3', 5]"
    assert not parse_config({}).step and parse_config({}).rank == []
    assert parse_config({"task": "run_ut", "run_ut": {"rank_list": ["0-1"]}}).section["rank_list"] == [0, 1]


@pytest.mark.parametrize("value", [["0-1e11"], ["0-100000000000000000000000"], [2 ** 70], ["²-3"], ["1-2-3"]])
def test_absurd_ranges_are_one_line_errors(value):
    with pytest.raises(ConfigError, match="'step'") as info:
        parse_config({"step": value})
    assert "\n" not in str(info.value)


# -- broken config files, dump_path checked at load ------------------------------------------------------
def test_config_nested_100000_levels_is_one_line(tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{"task": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(ParseError, match="nested too deeply"):
        load_config(str(path))


def test_load_config_checks_dump_path_for_dump_tasks_only(tmp_path):
    (tmp_path / "file").write_text("x")
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"task": "statistics", "dump_path": str(tmp_path / "file")}))
    with pytest.raises(PathError, match="not a folder"):
        load_config(str(config))
    config.write_text(json.dumps({"task": "run_ut", "dump_path": str(tmp_path / "file")}))
    assert load_config(str(config)).task == "run_ut"


# -- keys that do nothing here are named in one warning line -------------------------------------------
@pytest.mark.parametrize("raw, framework, named", [
    ({"enable_dataloader": True}, "mindspore", ["enable_dataloader"]),
    ({"is_deterministic": True}, "mindspore", ["is_deterministic"]),
    ({"task": "tensor", "tensor": {"file_format": "bin"}}, "pytorch", ["file_format"]),
    ({"task": "tensor", "tensor": {"file_format": "bin"}}, "mindspore", ["file_format"]),
    ({"task": "overflow_check", "overflow_check": {"check_mode": "aicore"}}, "pytorch", ["check_mode"]),
    ({"statistics": {"summary_mode": ["max"]}}, "mindspore", ["summary_mode"]),
    ({"enable_dataloader": True, "is_deterministic": True}, "mindspore", ["enable_dataloader", "is_deterministic"]),
])
def test_keys_without_effect_warn_in_one_line(tmp_path, capsys, raw, framework, named):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(dict(raw, dump_path=str(tmp_path / "dump"))))
    load_config(str(config), framework=framework)
    lines = [line for line in capsys.readouterr().out.splitlines() if "[WARNING]" in line]
    assert len(lines) == 1 and all(key in lines[0] for key in named), lines


@pytest.mark.parametrize("raw, framework", [
    ({"enable_dataloader": True, "is_deterministic": True}, "pytorch"),
    ({"task": "tensor", "level": "L2", "tensor": {"file_format": "bin"}}, "mindspore"),
    ({"task": "overflow_check", "level": "L2", "overflow_check": {"check_mode": "aicore"}}, "mindspore"),
    ({"level": "L2", "statistics": {"summary_mode": ["max"]}}, "mindspore"),
    ({"task": "tensor", "tensor": {"file_format": "npy"}}, "pytorch"),  # the packaged default, left as is
])
def test_keys_with_effect_do_not_warn(tmp_path, capsys, raw, framework):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(dict(raw, dump_path=str(tmp_path / "dump"))))
    load_config(str(config), framework=framework)
    assert "[WARNING]" not in capsys.readouterr().out


def test_online_run_ut_keys_of_the_reference_are_accepted():
    cfg = parse_config({"task": "tensor", "tensor": {"online_run_ut": True, "host": "127.0.0.1", "port": 8080,
                                                     "tls_path": "", "online_run_ut_recompute": True}})
    assert cfg.section["tls_path"] == "" and cfg.section["online_run_ut_recompute"] is True
    with pytest.raises(ConfigError, match="port"):
        parse_config({"task": "run_ut", "run_ut": {"port": 70000}})


def test_debuggers_name_their_framework_for_the_warning(tmp_path, capsys, ms):
    from msprobe.mindspore import PrecisionDebugger as MsDebugger
    from msprobe.pytorch import PrecisionDebugger as TorchDebugger

    config = tmp_path / "config.json"
    config.write_text(json.dumps({"task": "statistics", "dump_path": str(tmp_path / "dump"), "level": "L1",
                                  "enable_dataloader": True}))
    MsDebugger(config_path=str(config)).close()
    warnings = [line for line in capsys.readouterr().out.splitlines() if "[WARNING]" in line and "config:" in line]
    assert len(warnings) == 1 and "enable_dataloader (PyTorch only)" in warnings[0] and "mindspore" in warnings[0]
    TorchDebugger(config_path=str(config)).close()
    assert "enable_dataloader" not in capsys.readouterr().out
