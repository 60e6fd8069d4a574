"""config.json: load, validate every field, and resolve into one `DebuggerConfig`.

Each task section is described by a table `field -> (validator, default)`; an invalid value
raises ConfigError with the key, the bad value and what is allowed. `step`, `rank` and
`rank_list` become `IndexRanges` (intervals, never expanded). `load_config` also checks the
dump_path before training starts and warns, in one line, about keys that have no effect for
the framework, task and level chosen.
"""
import copy
import os
import sys
from dataclasses import dataclass, field

from msprobe.core.errors import ConfigError
from msprobe.core.log import logger
from msprobe.core.paths import check_dump_path, load_json
from msprobe.core.ranges import IndexRanges

__all__ = ["TASKS", "LEVELS", "DebuggerConfig", "load_config", "parse_config", "expand_ranges",
           "default_config_path", "DEFAULT_CONFIG", "IndexRanges", "keys_without_effect", "FRAMEWORKS",
           "load_task_section"]

TASKS = ("statistics", "tensor", "overflow_check", "run_ut", "free_benchmark", "grad_probe", "flight_recorder")
DUMP_TASKS = ("statistics", "tensor", "overflow_check", "free_benchmark", "flight_recorder")
LEVELS = ("L0", "L1", "L2", "mix")
DATA_MODES = ("all", "forward", "backward", "input", "output")
MS_SUMMARY_ITEMS = ("max", "min", "mean", "l2norm")
FRAMEWORKS = ("pytorch", "mindspore")
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
            _fail(key, value, f"'statistics' | 'md5' | 'xor' | a list of {list(MS_SUMMARY_ITEMS)}")
        return list(value)
    return _choice("statistics", "md5", "xor")(key, value)


def _bounds(key, value):
    if (not isinstance(value, list) or len(value) < 1
            or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in value)
            or any(a >= b for a, b in zip(value, value[1:]))):
        _fail(key, value, "a non-empty, strictly increasing list of numbers")
    return list(value)


def expand_ranges(key, value):
    """[0, "2-4", 7] -> IndexRanges holding 0, 2, 3, 4, 7 (compares equal to [0, 2, 3, 4, 7]);
    validates that items are ints >= 0 or "a-b" with a <= b. Never expands the ranges."""
    return IndexRanges.parse(key, value)


def _port(key, value):
    if value == -1:
        return value
    value = _int(0)(key, value)
    if value > 65535:
        _fail(key, value, "a port number 0-65535")
    return value


_COMMON = {"scope": (_scope, []), "list": (_str_list, []), "data_mode": (_data_mode, ["all"])}
SECTIONS = {
    "statistics": {**_COMMON, "summary_mode": (_summary_mode, "statistics"),
                   "bench_path": (_str, ""), "diff_nums": (_int(1), 1)},  # baseline mode: tasks/baseline.py
    "tensor": {**_COMMON, "file_format": (_choice("npy", "bin"), "npy"), "online_run_ut": (_bool, False),
               "nfs_path": (_str, ""), "host": (_str, ""), "port": (_port, -1), "tls_path": (_str, "./"),
               "online_run_ut_recompute": (_bool, False), "summary_mode": (_summary_mode, "statistics")},
    "overflow_check": {**_COMMON, "overflow_nums": (_int(1, allow=(-1,)), 1),
                       "check_mode": (_choice("all", "aicore", "atomic"), "all"),
                       "ignore_non_finite": (_str_list, []), "raise_at_producer": (_bool, False)},
    "flight_recorder": {**_COMMON, "depth": (_int(1), 64), "save_tensors": (_bool, False),
                        "ignore_non_finite": (_str_list, []), "raise_at_producer": (_bool, False)},
    "run_ut": {"white_list": (_str_list, []), "black_list": (_str_list, []), "error_data_path": (_str, "./"),
               "is_online": (_bool, False), "nfs_path": (_str, ""), "host": (_str, ""), "port": (_port, -1),
               "tls_path": (_str, "./"), "rank_list": (expand_ranges, IndexRanges([(0, 0)]))},
    "free_benchmark": {"scope": (_str_list, []), "list": (_str_list, []),
                       "fuzz_device": (_choice("npu", "cpu"), "npu"), "pert_mode": (_choice(*PERT_MODES), "improve_precision"),
                       "handler_type": (_choice("check", "fix"), "check"), "fuzz_level": (_choice("L1"), "L1"),
                       "fuzz_stage": (_choice("forward", "backward"), "forward"), "if_preheat": (_bool, False),
                       "preheat_step": (_int(1), 15), "max_sample": (_int(1), 20),
                       "bench_dtype": (_choice("float32", "float64"), "float32")},
    "grad_probe": {"grad_level": (_choice("L0", "L1", "L2"), "L1"), "param_list": (_str_list, []),
                   "bounds": (_bounds, [-1, 0, 1])},
}
_TOP = {"task": (_choice(*TASKS), "statistics"), "dump_path": (_str, "./dump_path"),
        "rank": (expand_ranges, IndexRanges()), "step": (expand_ranges, IndexRanges()),
        "level": (_choice(*LEVELS), "L1"), "enable_dataloader": (_bool, False), "async_dump": (_bool, False),
        "framework": (_choice("", *FRAMEWORKS), ""),
        "is_deterministic": (_bool, False)}


@dataclass
class DebuggerConfig:
    """The resolved configuration of one PrecisionDebugger (task section flattened in)."""
    task: str = "statistics"
    dump_path: str = "./dump_path"
    rank: IndexRanges = field(default_factory=IndexRanges)
    step: IndexRanges = field(default_factory=IndexRanges)
    level: str = "L1"
    enable_dataloader: bool = False
    async_dump: bool = False
    is_deterministic: bool = False
    framework: str = ""
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
                         async_dump=top["async_dump"], is_deterministic=top["is_deterministic"],
                         framework=top["framework"], section=section)
    for key in ("scope", "list", "data_mode", "summary_mode", "file_format", "overflow_nums", "check_mode"):
        if key in section:
            setattr(cfg, key, section[key])
    return cfg


# key -> (where it has an effect, predicate on (framework, task, level)); a key set to a value other
# than its default where the predicate is false gets one warning line. Keys whose owners implement
# them in more places are widened here.
NO_EFFECT_RULES = {
    "enable_dataloader": ("PyTorch only", lambda fw, task, level: fw != "mindspore"),
    "is_deterministic": ("PyTorch only", lambda fw, task, level: fw != "mindspore"),
    "file_format": ("MindSpore level L2 only",
                    lambda fw, task, level: task == "tensor" and fw != "pytorch" and level == "L2"),
    "check_mode": ("MindSpore level L2 only",
                   lambda fw, task, level: task == "overflow_check" and fw != "pytorch" and level == "L2"),
    "summary_mode": ("a list of items: MindSpore level L2 only",
                     lambda fw, task, level: fw != "pytorch" and level == "L2"),
}
_DEFAULTS_OF = {"enable_dataloader": False, "is_deterministic": False, "file_format": "npy", "check_mode": "all",
                "summary_mode": "statistics"}


def keys_without_effect(cfg, framework=None):
    """[(key, where it has an effect)] for keys set in `cfg` that do nothing for its framework/task/level."""
    framework = framework or cfg.framework
    found = []
    for key, (where, has_effect) in NO_EFFECT_RULES.items():
        value = getattr(cfg, key, _DEFAULTS_OF[key])
        if key == "summary_mode" and not isinstance(value, list):
            continue  # 'statistics' / 'md5' / 'xor' work everywhere; only the list form is L2-only
        if value != _DEFAULTS_OF[key] and not has_effect(framework, cfg.task, cfg.level):
            found.append((key, where))
    return found


def _caller_framework(depth=2):
    """'pytorch' / 'mindspore' when load_config is called from msprobe.<framework> (the debuggers)."""
    module = sys._getframe(depth).f_globals.get("__name__", "")
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "msprobe" and parts[1] in FRAMEWORKS else ""


def load_task_section(config_path, task, what="-config config.json"):
    """The validated section `task` of a config.json (run_ut reads only its run_ut section)."""
    raw = load_json(config_path, what=what)
    if not isinstance(raw, dict):
        raise ConfigError(f"{what}: the top level must be a JSON object, got {type(raw).__name__}.")
    return parse_config(dict(raw, task=task)).section


def load_config(config_path=None, framework=None, **overrides):
    """Load config.json (the packaged default when None), validate it, apply overrides.

    For the tasks that write under dump_path the path is checked now (characters, length, symlink,
    writability), so a bad one stops the constructor instead of the training run's end.
    `framework` (default: the calling msprobe.<framework> package, else config.json's "framework")
    selects which keys are reported as having no effect.
    """
    path = config_path or default_config_path()
    raw = load_json(path, what="config file")
    cfg = parse_config(raw, framework=framework or None, **overrides)
    if cfg.task != "run_ut":
        check_dump_path(cfg.dump_path)
    cfg.framework = cfg.framework or _caller_framework()
    unused = keys_without_effect(cfg)
    if unused:
        logger.warning("config: %s %s no effect for %s task %s level %s; ignored.",
                       ", ".join(f"{key} ({scope})" for key, scope in unused), "has" if len(unused) == 1 else "have",
                       cfg.framework or "this framework:", cfg.task, cfg.level)
    return cfg
