"""config.json: load, validate every field, and resolve into one `DebuggerConfig`.

Each task section is described by a table `field -> (validator, default)`; an invalid value
raises ConfigError with the key, the bad value and what is allowed.
"""
import copy
import os
from dataclasses import dataclass, field

from msprobe.core.errors import ConfigError
from msprobe.core.paths import load_json

__all__ = ["TASKS", "LEVELS", "DebuggerConfig", "load_config", "parse_config", "expand_ranges",
           "default_config_path", "DEFAULT_CONFIG"]

TASKS = ("statistics", "tensor", "overflow_check", "run_ut", "free_benchmark", "grad_probe")
DUMP_TASKS = ("statistics", "tensor", "overflow_check")
LEVELS = ("L0", "L1", "L2", "mix")
DATA_MODES = ("all", "forward", "backward", "input", "output")
MS_SUMMARY_ITEMS = ("max", "min", "mean", "l2norm")
PERT_MODES = ("improve_precision", "add_noise", "no_change", "bit_noise", "change_value", "to_cpu")


def default_config_path():
    """Path of the default config.json shipped inside the package."""
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "config.json")


DEFAULT_CONFIG = {
    "task": "statistics", "dump_path": "./dump_path", "rank": [], "step": [], "level": "L1",
    "enable_dataloader": False, "async_dump": False,
}


def _fail(key, value, allowed):
    raise ConfigError(f"config: invalid value {value!r} for '{key}'; allowed: {allowed}.")


def _choice(*options):
    def check(key, value):
        if value not in options:
            _fail(key, value, " | ".join(repr(o) for o in options))
        return value
    return check


def _bool(key, value):
    if isinstance(value, bool):
        return value
    if value in ("true", "false", "True", "False"):  # the reference docs show "if_preheat": "true"
        return value.lower() == "true"
    _fail(key, value, "true | false")


def _int(minimum=None, allow=()):
    def check(key, value):
        if isinstance(value, bool) or not isinstance(value, int) or (
                value not in allow and minimum is not None and value < minimum):
            extra = f" or {', '.join(map(str, allow))}" if allow else ""
            _fail(key, value, f"an integer >= {minimum}{extra}" if minimum is not None else "an integer")
        return value
    return check


def _str(key, value):
    if not isinstance(value, str):
        _fail(key, value, "a string")
    return value


def _str_list(key, value):
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        _fail(key, value, "a list of non-empty strings")
    return list(value)


def _scope(key, value):
    value = _str_list(key, value)
    if len(value) not in (0, 2):
        _fail(key, value, "an empty list or exactly two names [start, end]")
    return value


def _data_mode(key, value):
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or any(v not in DATA_MODES for v in value):
        _fail(key, value, f"a non-empty list of {list(DATA_MODES)}")
    if "all" in value and len(value) > 1:
        _fail(key, value, "['all'] alone, or a combination of forward/backward/input/output")
    return list(value)


def _summary_mode(key, value):
    if isinstance(value, list):
        if not value or any(v not in MS_SUMMARY_ITEMS for v in value):
            _fail(key, value, f"'statistics' | 'md5' | a list of {list(MS_SUMMARY_ITEMS)}")
        return list(value)
    return _choice("statistics", "md5")(key, value)


def _bounds(key, value):
    if (not isinstance(value, list) or len(value) < 1
            or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in value)
            or any(a >= b for a, b in zip(value, value[1:]))):
        _fail(key, value, "a non-empty, strictly increasing list of numbers")
    return list(value)


def expand_ranges(key, value):
    """[0, "2-4", 7] -> [0, 2, 3, 4, 7]; validates that items are ints >= 0 or "a-b" with a <= b."""
    if not isinstance(value, list):
        _fail(key, value, 'a list of integers >= 0 or "start-end" strings, e.g. [0, "4-6"]')
    result = []
    for item in value:
        if isinstance(item, int) and not isinstance(item, bool) and item >= 0:
            result.append(item)
            continue
        if isinstance(item, str):
            parts = item.split("-")
            if len(parts) == 2 and all(p.strip().isdigit() for p in parts):
                start, end = int(parts[0]), int(parts[1])
                if start <= end:
                    result.extend(range(start, end + 1))
                    continue
        _fail(key, item, 'integers >= 0 or "start-end" strings with start <= end, e.g. [0, "4-6"]')
    return sorted(set(result))


_COMMON = {"scope": (_scope, []), "list": (_str_list, []), "data_mode": (_data_mode, ["all"])}
SECTIONS = {
    "statistics": {**_COMMON, "summary_mode": (_summary_mode, "statistics")},
    "tensor": {**_COMMON, "file_format": (_choice("npy", "bin"), "npy"), "online_run_ut": (_bool, False),
               "nfs_path": (_str, ""), "host": (_str, ""), "port": (_int(0), -1), "summary_mode": (_summary_mode, "statistics")},
    "overflow_check": {**_COMMON, "overflow_nums": (_int(1, allow=(-1,)), 1),
                       "check_mode": (_choice("all", "aicore", "atomic"), "all")},
    "run_ut": {"white_list": (_str_list, []), "black_list": (_str_list, []), "error_data_path": (_str, "./"),
               "is_online": (_bool, False), "nfs_path": (_str, ""), "host": (_str, ""), "port": (_int(0), -1),
               "rank_list": (lambda k, v: expand_ranges(k, v), [0])},
    "free_benchmark": {"scope": (_str_list, []), "list": (_str_list, []),
                       "fuzz_device": (_choice("npu", "cpu"), "npu"), "pert_mode": (_choice(*PERT_MODES), "improve_precision"),
                       "handler_type": (_choice("check", "fix"), "check"), "fuzz_level": (_choice("L1"), "L1"),
                       "fuzz_stage": (_choice("forward", "backward"), "forward"), "if_preheat": (_bool, False),
                       "preheat_step": (_int(1), 15), "max_sample": (_int(1), 20)},
    "grad_probe": {"grad_level": (_choice("L0", "L1", "L2"), "L1"), "param_list": (_str_list, []),
                   "bounds": (_bounds, [-1, 0, 1])},
}
_TOP = {"task": (_choice(*TASKS), "statistics"), "dump_path": (_str, "./dump_path"),
        "rank": (expand_ranges, []), "step": (expand_ranges, []), "level": (_choice(*LEVELS), "L1"),
        "enable_dataloader": (_bool, False), "async_dump": (_bool, False), "framework": (_str, ""),
        "is_deterministic": (_bool, False)}


@dataclass
class DebuggerConfig:
    """The resolved configuration of one PrecisionDebugger (task section flattened in)."""
    task: str = "statistics"
    dump_path: str = "./dump_path"
    rank: list = field(default_factory=list)
    step: list = field(default_factory=list)
    level: str = "L1"
    enable_dataloader: bool = False
    async_dump: bool = False
    scope: list = field(default_factory=list)
    list: list = field(default_factory=list)
    data_mode: list = field(default_factory=lambda: ["all"])
    summary_mode: object = "statistics"
    file_format: str = "npy"
    overflow_nums: int = 1
    check_mode: str = "all"
    section: dict = field(default_factory=dict)  # every validated field of the task's section

    def wants(self, direction, io):
        """Whether data_mode keeps data of `direction` (forward/backward) and `io` (input/output)."""
        modes = self.data_mode
        if "all" in modes:
            return True
        dirs = [m for m in modes if m in ("forward", "backward")] or ["forward", "backward"]
        ios = [m for m in modes if m in ("input", "output")] or ["input", "output"]
        return direction in dirs and io in ios


def _validate_section(task, raw):
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"config: section '{task}' must be a JSON object, got {type(raw).__name__}.")
    schema = SECTIONS[task]
    unknown = sorted(set(raw) - set(schema))
    if unknown:
        raise ConfigError(f"config: unknown key(s) {unknown} in section '{task}'; known: {sorted(schema)}.")
    out = {}
    for key, (check, default) in schema.items():
        out[key] = check(f"{task}.{key}", raw[key]) if key in raw else copy.deepcopy(default)
    return out


def parse_config(raw, **overrides):
    """Validate a config dict (as loaded from config.json) and apply non-None overrides."""
    if not isinstance(raw, dict):
        raise ConfigError(f"config: the top level must be a JSON object, got {type(raw).__name__}.")
    raw = dict(raw)
    for key, value in overrides.items():
        if value is not None:
            raw[key] = value
    top = {}
    for key, (check, default) in _TOP.items():
        top[key] = check(key, raw[key]) if key in raw else copy.deepcopy(default)
    unknown = sorted(set(raw) - set(_TOP) - set(SECTIONS))
    if unknown:
        raise ConfigError(f"config: unknown key(s) {unknown}; known: {sorted(set(_TOP) | set(SECTIONS))}.")
    if not top["dump_path"].strip():
        raise ConfigError("config: 'dump_path' must not be empty.")
    # validate every section present, so a typo in an unused section is still reported
    sections = {task: _validate_section(task, raw[task]) for task in SECTIONS if task in raw}
    task = top["task"]
    section = sections.get(task) or _validate_section(task, {})
    if task == "overflow_check" and top["level"] not in ("L0", "L1", "mix", "L2"):
        _fail("level", top["level"], "'L0' | 'L1' | 'mix' | 'L2' for overflow_check")
    if task == "free_benchmark" and top["level"] != "L1":
        _fail("level", top["level"], "'L1' for task free_benchmark")
    cfg = DebuggerConfig(task=task, dump_path=top["dump_path"], rank=top["rank"], step=top["step"],
                         level=top["level"], enable_dataloader=top["enable_dataloader"],
                         async_dump=top["async_dump"], section=section)
    for key in ("scope", "list", "data_mode", "summary_mode", "file_format", "overflow_nums", "check_mode"):
        if key in section:
            setattr(cfg, key, section[key])
    return cfg


def load_config(config_path=None, **overrides):
    """Load config.json (the packaged default when None), validate it, apply overrides."""
    path = config_path or default_config_path()
    raw = load_json(path, what="config file")
    return parse_config(raw, **overrides)
