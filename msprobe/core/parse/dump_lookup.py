"""`pk`: look up one API in a dump: its tensors' statistics and its call stack.

Reads today's `dump.json` (with `stack.json` beside it) and the old `.pkl` format of earlier msprobe
versions (JSON lines `[name, ..., dtype, shape, [max, min, mean]]` and `[name.stack_info, frames]`).
Names may be written with dots or underscores: `Functional.linear.0.forward` or
`Functional_linear_0_forward`; a name without direction (`Functional.linear.0`) shows both directions.
"""
import json
import os
import re
from typing import Dict, List, Tuple

from msprobe.core.errors import ParseError
from msprobe.core.paths import check_path, load_json

__all__ = ["lookup_api", "render_lookup"]

_STAT_KEYS = ("Max", "Min", "Mean")


def _tensor_lines(prefix: str, value, out: List[str]) -> None:
    """Flatten nested input/output records into '[name][dtype: ..][shape: ..][max: ..][min: ..][mean: ..]'."""
    if isinstance(value, dict) and "type" in value:
        if "dtype" in value or "Max" in value:
            stats = "".join(f"[{k.lower()}: {value.get(k)}]" for k in _STAT_KEYS)
            file_part = f"[file: {value['data_name']}]" if value.get("data_name") else ""
            out.append(f"[{prefix}][dtype: {value.get('dtype')}][shape: {value.get('shape')}]{stats}{file_part}")
        elif "value" in value:
            out.append(f"[{prefix}][{value['type']}: {value['value']}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            _tensor_lines(f"{prefix}.{key}", item, out)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _tensor_lines(f"{prefix}.{i}", item, out)


def _name_matches(query: str, name: str) -> bool:
    if name == query or name.startswith(query + "."):
        return True
    return name.replace(".", "_") == query or name.replace(".", "_").startswith(query + "_")


def _stacks(stack_path: str) -> Dict[str, List[str]]:
    if not os.path.isfile(stack_path):
        return {}
    raw = load_json(stack_path, what="stack.json")
    stacks = {}
    for key, value in raw.items():
        # 1.2.1 >= 8.0 style: {"0": [[names...], [frames...]]}; ours: {name: [frames...]}
        if isinstance(value, list) and len(value) == 2 and isinstance(value[0], list) and isinstance(value[1], list):
            for name in value[0]:
                stacks[name] = value[1]
        elif isinstance(value, list):
            stacks[key] = value
    return stacks


def _lookup_dump_json(path: str, query: str) -> List[Tuple[str, List[str], List[str]]]:
    dump = load_json(path, what="dump.json")
    data = dump.get("data") if isinstance(dump, dict) else None
    if not isinstance(data, dict):
        raise ParseError(f"'{path}' has no 'data' section; is it a msprobe dump.json?")
    stacks = _stacks(os.path.join(os.path.dirname(path), "stack.json"))
    found = []
    for name, record in data.items():
        if not _name_matches(query, name):
            continue
        lines: List[str] = []
        for key, value in (record.items() if isinstance(record, dict) else []):
            label = {"input_args": "input", "input_kwargs": "input", "output": "output"}.get(key, key)
            _tensor_lines(f"{name}.{label}", value, lines)
        forward_name = re.sub(r"\.backward(\.|$)", r".forward\1", name)
        found.append((name, lines, stacks.get(name) or stacks.get(forward_name) or []))
    return found


def _lookup_pkl(path: str, query: str) -> List[Tuple[str, List[str], List[str]]]:
    lines, frames = [], []
    with open(path, encoding="utf-8") as handle:
        for number, text in enumerate(handle, 1):
            if not text.strip():
                continue
            try:
                item = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ParseError(f"'{path}' line {number} is not JSON ({exc.msg}); is it an msprobe .pkl?") from None
            if not isinstance(item, list) or not item or not isinstance(item[0], str):
                continue
            if not _name_matches(query, item[0]) and not item[0].startswith(query):
                continue
            if "stack_info" in item[0] and len(item) == 2:
                frames += [f"File {f[0]}, line {f[1]}, in {f[2]}\n{f[3]}" for f in item[1] if len(f) >= 4]
            elif len(item) > 5 and isinstance(item[5], list) and len(item[5]) >= 3:
                lines.append(f"[{item[0]}][dtype: {item[3]}][shape: {item[4]}][max: {item[5][0]}]"
                             f"[min: {item[5][1]}][mean: {item[5][2]}]")
    return [(query, lines, frames)] if lines or frames else []


def lookup_api(path: str, api_name: str) -> List[Tuple[str, List[str], List[str]]]:
    """[(full name, statistic lines, stack lines)] of every dumped call matching `api_name`."""
    full = check_path(path, kind="file", what="-f", allow_symlink=True)
    if not api_name.strip():
        raise ParseError("-n needs an API name such as Functional.linear.0.forward.")
    if full.endswith(".pkl"):
        return _lookup_pkl(full, api_name.strip())
    if full.endswith(".json"):
        return _lookup_dump_json(full, api_name.strip())
    raise ParseError(f"'{path}' is neither a dump.json nor an old-format .pkl file.")


def render_lookup(found: List[Tuple[str, List[str], List[str]]], api_name: str) -> str:
    if not found:
        return f"No API named '{api_name}' in this dump."
    blocks = []
    for name, lines, frames in found:
        block = [f"{name}", "Statistic Info:"] + [f"  {line}" for line in lines]
        if frames:
            block.append("Stack:")
            for frame in frames:  # "File f, line n, in fn, \n code": location, then the code indented
                parts = [part.strip() for part in str(frame).split("\n")]
                block += [f"  {parts[0].rstrip(',')}"] + [f"      {part}" for part in parts[1:] if part]
        blocks.append("\n".join(block))
    return "\n\n".join(blocks)
