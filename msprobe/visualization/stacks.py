"""Read stack.json and shorten each node's call stack to the one line that places it in user code.

Simplified stacks (the default) keep, for a module, the first line that calls the layer by its
attribute name (`self.l1(` for `Module.l1.Linear.forward.0`); for an API, the line after a hook
template frame when the dump has one; otherwise the first line (the call site).
`complete=True` keeps every line as stack.json has it.
"""
import json
import os
from typing import Dict, List

from msprobe.core.errors import ParseError
from msprobe.core.naming import EntryName
from msprobe.core.paths import check_path

__all__ = ["read_stacks", "node_stack"]

_TEMPLATE_MARK = "Template("


def read_stacks(path: str) -> Dict[str, List[str]]:
    """stack.json -> {entry name: [lines]}; accepts `{name: [lines]}` and the grouped
    `{"0": [[names...], [lines...]]}` layout. A missing file gives no stacks."""
    if not path or not os.path.isfile(path):
        return {}
    full = check_path(path, kind="file", what="stack file", allow_symlink=True)
    try:
        with open(full, encoding="utf-8") as handle:
            raw = json.load(handle)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ParseError(f"stack file '{full}' is not valid JSON ({exc}); dump again or remove it.") from None
    if not isinstance(raw, dict):
        raise ParseError(f"stack file '{full}' must hold a JSON object.")
    stacks = {}
    for key, value in raw.items():
        if (key.isdigit() and isinstance(value, list) and len(value) == 2 and isinstance(value[0], list)
                and isinstance(value[1], list)):
            lines = [str(line) for line in value[1]]
            for name in value[0]:
                stacks[str(name)] = lines
        elif isinstance(value, list):
            stacks[key] = [str(line) for line in value]
        elif value is not None:
            stacks[key] = [str(value)]
    return stacks


def _layer_name(node_id: str) -> str:
    """The attribute name of a module call ('b' of 'Module.a.b.Linear.forward.0'); '' for the root."""
    name = EntryName.parse(node_id)
    if name is None or not name.is_module:
        return ""
    path = name.api.rsplit(".", 1)[0] if "." in name.api else ""
    return path.rsplit(".", 1)[-1]


def _simplify(node_id: str, lines: List[str], is_module: bool) -> List[str]:
    if not lines:
        return []
    if is_module:
        layer = _layer_name(node_id)
        if layer:
            marker = layer + "("
            for line in lines:
                if marker in line:
                    return [line]
        return [lines[0]]  # e.g. a Sequential's child, called as `module(input)`: the call site
    for index, line in enumerate(lines[:-1]):
        if _TEMPLATE_MARK in line:
            return [lines[index + 1]]
    return [lines[0]]


def _forward_twin(node_id: str) -> str:
    if ".backward." in node_id:
        return node_id.replace(".backward.", ".forward.")
    if node_id.endswith(".backward"):
        return node_id[:-len("backward")] + "forward"
    return ""


def node_stack(node_id: str, stacks: Dict[str, List[str]], is_module: bool, complete: bool) -> List[str]:
    """The stack lines shown for one node; a backward node without a stack borrows its forward twin's."""
    lines = stacks.get(node_id)
    if not lines:
        twin = _forward_twin(node_id)
        lines = stacks.get(twin) if twin else None
    if not lines:
        return []
    return list(lines) if complete else _simplify(node_id, lines, is_module)
