"""The config reference, generated from the task registry: packaged config.json, docs/config.md tables, --explain.

Every text here comes from the declarations (core/config.py TOP_FIELDS, each task's `config_fields` and its
class docstring), so the file users start from, the documentation and the CLI cannot disagree with what
the validator accepts. tests/core/test_config_reference.py fails when config.json or docs/config.md drift.
"""
import inspect
import json
from typing import Any, Dict, List, Optional, Sequence, Type

from msprobe.core.config import KEYS_26X, TASKS_26X, TOP_FIELDS
from msprobe.core.config_fields import Field
from msprobe.core.dump.tasks import Task, config_tasks, section_fields, task_class
from msprobe.core.errors import ConfigError
from msprobe.core.ranges import IndexRanges

__all__ = ["default_config", "default_config_text", "markdown_reference", "explain", "DOC_BEGIN", "DOC_END"]

DOC_BEGIN = "<!-- BEGIN generated config reference: msprobe -f pytorch config --markdown -->"
DOC_END = "<!-- END generated config reference -->"


def _plain(value: Any) -> Any:
    return value.to_config() if isinstance(value, IndexRanges) else value


def default_config() -> Dict[str, Any]:
    """The packaged config.json: the listed top-level keys, then each shipped task's listed keys."""
    out: Dict[str, Any] = {f.name: _plain(f.default) for f in TOP_FIELDS if f.listed}
    for cls in config_tasks(shipped_only=True):
        listed = {f.name: _plain(f.default) for f in section_fields(cls.name) if f.listed}
        if listed:
            out[cls.name] = listed
    return out


def _json_line(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def default_config_text() -> str:
    """config.json as shipped: four-space indent, each list on one line."""
    lines = []
    for key, value in default_config().items():
        if isinstance(value, dict):
            inner = [f'        "{k}": {_json_line(v)}' for k, v in value.items()]
            lines.append(f'    "{key}": {{\n' + ",\n".join(inner) + "\n    }")
        else:
            lines.append(f'    "{key}": {_json_line(value)}')
    return "{\n" + ",\n".join(lines) + "\n}\n"


def _docstring(cls: Type[Task]) -> str:
    return inspect.cleandoc(cls.__doc__ or "")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _field_rows(fields: Sequence[Field]) -> List[str]:
    rows = ["| key | default | allowed | meaning |", "|---|---|---|---|"]
    for f in fields:
        rows.append(f"| `{f.name}` | `{_json_line(_plain(f.default))}` | {_cell(f.rule.allowed)} | {_cell(f.doc)} |")
    return rows


def _task_heading(cls: Type[Task]) -> str:
    notes = []
    if tuple(cls.levels) != ("L0", "L1", "L2", "mix"):
        notes.append("level " + " / ".join(cls.levels))
    if tuple(cls.frameworks) != ("pytorch", "mindspore"):
        notes.append(" / ".join(cls.frameworks) + " only")
    return f"### `{cls.name}`" + (f" ({', '.join(notes)})" if notes else "")


def markdown_reference() -> str:
    """The generated part of docs/config.md: top-level keys, one section per task, keys that warn."""
    out = [DOC_BEGIN, "", "### Top level", ""] + _field_rows(TOP_FIELDS)
    effects = [(f"`{f.name}`", f.effect.where) for f in TOP_FIELDS if f.effect is not None]
    for cls in config_tasks(shipped_only=True):
        fields = section_fields(cls.name)
        out += ["", _task_heading(cls), "", " ".join(_docstring(cls).split()), ""] + _field_rows(fields)
        effects += [(f"`{cls.name}.{f.name}`", f.effect.where) for f in fields if f.effect is not None]
    out += ["", "### Keys that warn when set where they have no effect", "", "| key | has an effect for |", "|---|---|"]
    seen = set()
    for key, where in effects:
        if key not in seen:
            seen.add(key)
            out.append(f"| {key} | {where} |")
    out += ["", "### Keys and tasks of msprobe 26.x", "", "| 26.x | here |", "|---|---|"]
    out += [f"| {_cell(name)} | {_cell(text)} |" for name, text in _from_26x()]
    return "\n".join(out + ["", DOC_END])


#: what 26.x's keys with a counterpart are here (the others: config.KEYS_26X / TASKS_26X, refused when used)
_MEANINGFUL_26X = (
    ("`dump_enable`", "top-level key: " + next(f.doc for f in TOP_FIELDS if f.name == "dump_enable")),
    ("`risk_level`", "top-level key (default `ALL` here, `FOCUS` in 26.x): "
     + next(f.doc for f in TOP_FIELDS if f.name == "risk_level")),
    ("`statistics.tensor_list`", "a key of the statistics section: calls whose name contains one of its strings also "
     "get their tensors in dump_tensor_data/"),
    ("`start(token_range=[first, last])`", "PrecisionDebugger.start: only those forwards of the model are dumped"),
    ("`start(rank_id=N)`", "PrecisionDebugger.start: dump as rank N (folder rank<N>) when no process group says it"),
    ("`async_dump`", "top-level key: the same meaning"),
    ("`extra_info: true`", "accepted: stack.json and construct.json are always written"),
)


def _from_26x() -> List[tuple]:
    """(26.x key or task, what it is here) for every 26.x config key and task a user may bring."""
    refused = [(f"`{key}`", f"refused: {text}") for key, text in KEYS_26X.items() if key != "extra_info"]
    refused.append(("`extra_info: false`", f"refused: {KEYS_26X['extra_info']}"))
    tasks = [(f"task `{task}`", f"refused: {text}") for task, text in TASKS_26X.items()]
    return list(_MEANINGFUL_26X) + refused + tasks


def _explain_one(cls: Type[Task]) -> str:
    section = cls.section or cls.name
    lines = [_task_heading(cls)[4:].replace("`", ""), "", _docstring(cls), ""]
    fields = section_fields(section) if cls.section is None else tuple(cls.config_fields or ())
    lines.append(f'config.json section "{section}":' if fields else "no config.json section.")
    width = max((len(f.name) for f in fields), default=0)
    for f in fields:
        lines.append(f"  {f.name:<{width}}  default {_json_line(_plain(f.default))}; {f.rule.allowed}")
        lines.append(f"  {'':<{width}}  {f.doc.replace('`', '')}")
    return "\n".join(lines)


def explain(task: Optional[str] = None) -> str:
    """The reference of one task (its docstring and its keys), or of every config task."""
    if task is None:
        keys_26x = "\n".join(f"  {name.replace('`', '')}: {text.replace('`', '')}" for name, text in _from_26x())
        return "\n\n".join([*(_explain_one(cls) for cls in config_tasks(shipped_only=True)),
                             "Keys and tasks of msprobe 26.x:\n" + keys_26x])
    try:
        cls = task_class(task)
    except KeyError:
        names = [cls.name for cls in config_tasks()]
        raise ConfigError(f"config --explain: no task '{task}'; tasks: {', '.join(names)}.") from None
    return _explain_one(cls)
