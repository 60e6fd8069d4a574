"""config.json: load, validate every field, and resolve into one `DebuggerConfig`.

The sections are declared by the tasks themselves (`Task.config_fields` in core/dump/tasks/, one Field per
key: rule, default, doc); this module validates from that registry, so a new task brings its section with
it. An invalid value raises ConfigError with the key, the bad value and what is allowed. `step`, `rank` and
`rank_list` become `IndexRanges` (intervals, never expanded). `load_config` also checks the dump_path before
training starts and warns, in one line, about keys that have no effect for the framework, task and level
chosen. config_reference.py turns the same declarations into the packaged config.json and the docs.
"""
import copy
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from msprobe.core import config_fields as rules
from msprobe.core.config_fields import Effect, Field
from msprobe.core.errors import ConfigError
from msprobe.core.log import logger
from msprobe.core.paths import check_dump_path, load_json
from msprobe.core.ranges import IndexRanges

# TASKS, DUMP_TASKS and SECTIONS are the registry's, computed when asked for (module __getattr__ below)
__all__ = ["LEVELS", "DebuggerConfig", "load_config", "parse_config", "expand_ranges",
           "default_config_path", "DEFAULT_CONFIG", "IndexRanges", "keys_without_effect", "FRAMEWORKS",
           "load_task_section", "TOP_FIELDS", "task_names", "dump_task_names", "section_schema", "KEYS_26X",
           "TASKS_26X", "RISK_LEVELS"]

LEVELS = ("L0", "L1", "L2", "mix")
RISK_LEVELS = ("ALL", "FOCUS", "CORE")
FRAMEWORKS = ("pytorch", "mindspore")


def default_config_path():
    """Path of the default config.json shipped inside the package."""
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "config.json")


DEFAULT_CONFIG = {
    "task": "statistics", "dump_path": "./dump_path", "rank": [], "step": [], "level": "L1",
    "enable_dataloader": False, "async_dump": False,
}


def _fail(key, value, allowed):
    rules.fail(key, value, allowed)


def expand_ranges(key, value):
    """[0, "2-4", 7] -> IndexRanges holding 0, 2, 3, 4, 7 (compares equal to [0, 2, 3, 4, 7]);
    validates that items are ints >= 0 or "a-b" with a <= b. Never expands the ranges."""
    return IndexRanges.parse(key, value)


_PYTORCH_ONLY = Effect("PyTorch only", lambda fw, task, level, value: fw != "mindspore")


def _task_rule() -> rules.Rule:
    """`task`: one of the registered config tasks (checked against the registry when used)."""
    def check(key, value):
        names = task_names()
        if value in TASKS_26X:
            raise ConfigError(f"config: task '{value}' (msprobe 26.x) is not a task here: {TASKS_26X[value]}.")
        if value not in names:
            _fail(key, value, " | ".join(repr(n) for n in names))
        return value
    return rules.Rule(check, "a registered task (see the task sections below)", "str")


#: the top level of config.json (the task sections come from the registry)
TOP_FIELDS: Tuple[Field, ...] = (
    Field("task", _task_rule(), "statistics", "the task (one section below each)"),
    Field("dump_path", rules.string, "./dump_path", "output directory, checked when the debugger is created (see "
          "below); every folder created 0750, files 0640"),
    Field("rank", rules.ranges, IndexRanges(), "ranks to collect: integers and `\"a-b\"` ranges, e.g. "
          "`[0, \"4-6\"]`; `[]`: all"),
    Field("step", rules.ranges, IndexRanges(), "steps to collect, same syntax; ranges are kept as intervals, so "
          "`[\"0-20000000\"]` costs nothing; `[]`: all"),
    Field("level", rules.choice(*LEVELS), "L1", "`L0` modules/cells, `L1` APIs, `mix` both with parent links, `L2` "
          "ATen ops (PyTorch) / kernels (MindSpore graph mode)"),
    Field("enable_dataloader", rules.boolean, False, "PyTorch only (see [dump.md](dump.md))", effect=_PYTORCH_ONLY),
    Field("async_dump", rules.boolean, False, "write files from a background thread; always flushed at `step()`, "
          "`stop()` and process exit"),
    Field("framework", rules.choice("", *FRAMEWORKS), "", "`pytorch` or `mindspore`; normally taken from the "
          "debugger that reads the file", listed=False),
    Field("is_deterministic", rules.boolean, False, "PyTorch only: deterministic algorithms while dumping",
          listed=False, effect=_PYTORCH_ONLY),
    # keys of msprobe 26.x's config.json that mean something here (see KEYS_26X below for the others)
    Field("dump_enable", rules.boolean, None, "switch dumping on and off while training runs: set, the file is "
          "looked at again at each `start()` and `step()` (one `stat`), and an edit to `false` / `true` takes effect "
          "there; absent (`null`): dumping is always on and the file is read once", listed=False),
    Field("risk_level", rules.choice(*RISK_LEVELS), "ALL", "levels L1/mix without `scope`/`list`: `ALL` every API, "
          "`FOCUS` all but shape, view, copy and creation APIs, `CORE` only matrix products, convolutions, "
          "normalisations, embeddings, attention, fused optimizers and collectives (core/dump/risk.py); modules "
          "are always kept", listed=False),
)
#: msprobe 26.x's keys and tasks without a counterpart here: what to use instead (one line each, shown when refused)
KEYS_26X: Dict[str, str] = {
    "precision": "statistics are computed one way only here (docs/dump.md says how); remove "
                 "'precision'",
    "custom_op_namespaces": "level L2 records every torch.ops operator, custom namespaces included; remove "
                            "'custom_op_namespaces'",
    "load": "feeding dumped inputs back into modules is not supported; to re-run one API on dumped inputs use "
            "run_ut or op_generate (docs/api_checker.md)",
    "extra_info": "stack.json and construct.json are always written; remove 'extra_info'",
}
TASKS_26X: Dict[str, str] = {
    "structure": "task 'statistics' writes the same calls, dtypes and shapes (with their statistics)",
    "diff_check": "dump both runs with task 'statistics' and summary_mode 'xor', then msprobe compare (the first "
                  "divergence), or statistics.bench_path to save tensors where a run departs from a good one "
                  "(docs/determinism.md)",
    "nan_check": "task 'overflow_check' (the first API producing inf/nan) or 'flight_recorder'",
}
_TOP = {f.name: f for f in TOP_FIELDS}


def task_names() -> Tuple[str, ...]:
    """The names config.json's "task" may take (the registry's config tasks)."""
    from msprobe.core.dump.tasks import config_tasks
    return tuple(cls.name for cls in config_tasks())


def dump_task_names(framework: Optional[str] = None) -> Tuple[str, ...]:
    """The config tasks that run in the dump collector (PrecisionDebugger.start/stop), of `framework` if given
    (its debugger's list: Task.frameworks)."""
    from msprobe.core.dump.tasks import config_tasks
    return tuple(cls.name for cls in config_tasks() if cls.collects and (framework is None
                                                                          or framework in cls.frameworks))


def section_schema(section: str) -> Dict[str, Field]:
    """key -> Field of config.json section `section` (empty for a task without one)."""
    from msprobe.core.dump.tasks import section_fields
    return {f.name: f for f in section_fields(section)}


def __getattr__(name: str) -> Any:
    # the task lists are the registry's, asked for when used (importing the tasks here would be a cycle)
    if name == "TASKS":
        return task_names()
    if name == "DUMP_TASKS":
        return dump_task_names()
    if name == "SECTIONS":
        return {task: section_schema(task) for task in task_names()}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
    dump_enable: Optional[bool] = None  # set: re-read from the config file at start()/step() (core/debugger_base)
    risk_level: str = "ALL"
    scope: List[str] = field(default_factory=list)
    list: List[str] = field(default_factory=list)
    data_mode: List[str] = field(default_factory=lambda: ["all"])
    summary_mode: Any = "statistics"  # 'statistics' | 'md5' | a list of items (MindSpore L2)
    file_format: str = "npy"
    overflow_nums: int = 1
    check_mode: str = "all"
    section: Dict[str, Any] = field(default_factory=dict)  # every validated field of the task's section

    def wants(self, direction: str, io: str) -> bool:
        """Whether data_mode keeps data of `direction` (forward/backward) and `io` (input/output)."""
        modes = self.data_mode
        if "all" in modes:
            return True
        dirs = [m for m in modes if m in ("forward", "backward")] or ["forward", "backward"]
        ios = [m for m in modes if m in ("input", "output")] or ["input", "output"]
        return direction in dirs and io in ios


def _validate_section(task: str, raw: Any) -> Dict[str, Any]:
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"config: section '{task}' must be a JSON object, got {type(raw).__name__}.")
    schema = section_schema(task)
    unknown = sorted(set(raw) - set(schema))
    if unknown:
        raise ConfigError(f"config: unknown key(s) {unknown} in section '{task}'; known: {sorted(schema)}.")
    return {key: f.rule(f"{task}.{key}", raw[key]) if key in raw else copy.deepcopy(f.default)
            for key, f in schema.items()}


def _check_task_fits(task: str, level: str) -> None:
    from msprobe.core.dump.tasks import task_class
    levels = task_class(task).levels
    if level not in levels:
        _fail("level", level, f"{' | '.join(repr(v) for v in levels)} for task {task}")


def parse_config(raw: Any, **overrides: Any) -> "DebuggerConfig":
    """Validate a config dict (as loaded from config.json) and apply non-None overrides."""
    if not isinstance(raw, dict):
        raise ConfigError(f"config: the top level must be a JSON object, got {type(raw).__name__}.")
    raw = dict(raw)
    for key in KEYS_26X:
        if key in raw and not (key == "extra_info" and raw[key] is True):  # true: what is done here anyway
            raise ConfigError(f"config: '{key}' (msprobe 26.x) has no counterpart here: {KEYS_26X[key]}.")
    raw.pop("extra_info", None)
    for key, value in overrides.items():
        if value is not None:
            raw[key] = value
    top = {key: f.rule(key, raw[key]) if key in raw else copy.deepcopy(f.default) for key, f in _TOP.items()}
    names = task_names()
    unknown = sorted(set(raw) - set(_TOP) - set(names))
    if unknown:
        raise ConfigError(f"config: unknown key(s) {unknown}; known: {sorted(set(_TOP) | set(names))}.")
    if not top["dump_path"].strip():
        raise ConfigError("config: 'dump_path' must not be empty.")
    # validate every section present, so a typo in an unused section is still reported
    sections = {task: _validate_section(task, raw[task]) for task in names if task in raw}
    task = top["task"]
    section = sections.get(task) or _validate_section(task, {})
    _check_task_fits(task, top["level"])
    cfg = DebuggerConfig(task=task, dump_path=top["dump_path"], rank=top["rank"], step=top["step"],
                         level=top["level"], enable_dataloader=top["enable_dataloader"],
                         async_dump=top["async_dump"], is_deterministic=top["is_deterministic"],
                         framework=top["framework"], dump_enable=top["dump_enable"], risk_level=top["risk_level"],
                         section=section)
    for key in ("scope", "list", "data_mode", "summary_mode", "file_format", "overflow_nums", "check_mode"):
        if key in section:
            setattr(cfg, key, section[key])
    return cfg


def keys_without_effect(cfg: "DebuggerConfig", framework: Optional[str] = None) -> List[Tuple[str, str]]:
    """[(key, where it has an effect)] for keys set in `cfg` that do nothing for its framework/task/level
    (each Field's `effect`; a key at its default never counts)."""
    framework = framework or cfg.framework
    values = {"enable_dataloader": cfg.enable_dataloader, "is_deterministic": cfg.is_deterministic}
    candidates = [(f, values[f.name]) for f in TOP_FIELDS if f.name in values]
    candidates += [(f, cfg.section[f.name]) for f in section_schema(cfg.task).values() if f.name in cfg.section]
    return [(f.name, f.effect.where) for f, value in candidates
            if f.effect is not None and value != f.default
            and not f.effect.applies(framework, cfg.task, cfg.level, value)]


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
