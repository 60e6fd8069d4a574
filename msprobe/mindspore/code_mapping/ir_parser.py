"""Read a MindSpore IR file (`save_graphs`) into scope -> source lines, one entry per graph node.

A node starts with `%N(name) = Op(...)`; the comment lines that follow it give its scope
(`# Fullname with scope: (Default/fc-Dense/MatMul-op0)`) and its source lines (`# In file PATH:LINE, COLS/CODE/`).
Backward nodes (scope `Gradients/...`) carry `forward_unique_id`; they get the source lines of the forward
node with that `unique_id`, because their own lines point into MindSpore's autodiff machinery.
Text only: MindSpore is not imported. Every line is read in time linear in its length (no pattern that
backtracks over a long line: a 168 KB line used to take 30 s).
"""
import re
from dataclasses import dataclass, field
from typing import Dict, List

from msprobe.core.errors import ParseError
from msprobe.core.paths import check_path

__all__ = ["IrNode", "parse_ir", "scope_key"]

_NODE = re.compile(r"^\s*%\d+\([^)]*\)\s*=\s*\S+\(")
_SCOPE = re.compile(r"^\s*#\s*Fullname with scope:\s*\((?P<scope>.*)\)\s*$")
_CODE = re.compile(r"\s*#\s*In file ")
_ATTRS = re.compile(r"cnode_primal_attrs:\s*\{")
_UNIQUE_ID = re.compile(r"\bunique_id:\s*\"(?P<id>\d+)\"")
_FORWARD_ID = re.compile(r"\bforward_unique_id:\s*\"(?P<id>\d+)\"")


@dataclass
class IrNode:
    scope: str
    code: List[str] = field(default_factory=list)
    unique_id: str = ""
    forward_unique_id: str = ""


def scope_key(scope: str) -> str:
    """The scope as it appears in kernel dump file names ('/' becomes '_')."""
    return scope.replace("/", "_")


def _primal_attr(line: str, pattern) -> str:
    """The first id `pattern` finds inside a `cnode_primal_attrs: {...}` block of the line, or ''.

    Blocks are cut at their '}' with str.find and searched one after the other, so each character is looked
    at a bounded number of times."""
    position = 0
    while True:
        block = _ATTRS.search(line, position)
        if block is None:
            return ""
        close = line.find("}", block.end())
        close = len(line) if close < 0 else close
        found = pattern.search(line, block.end(), close)
        if found:
            return found.group("id")
        position = close


def _code(line: str) -> str:
    """'In file PATH:LINE, COLS/CODE' without the trailing '/' and blanks, or '' for another line."""
    start = _CODE.match(line)
    if start is None:
        return ""
    body = line[start.end():].rstrip()
    return "In file " + (body[:-1] if body.endswith("/") else body)


def _nodes(lines: List[str]) -> List[IrNode]:
    nodes, current = [], None
    for line in lines:
        if _NODE.match(line):
            unique, forward = _primal_attr(line, _UNIQUE_ID), _primal_attr(line, _FORWARD_ID)
            current = IrNode("", unique_id=unique if not forward else "", forward_unique_id=forward)
            nodes.append(current)
            continue
        if current is None:
            continue
        scope = _SCOPE.match(line)
        if scope:
            current.scope = scope.group("scope")
            continue
        code = _code(line)
        if code and current.scope:
            current.code.append(code)
        elif line.strip() == "}" or line.startswith("subgraph "):
            current = None
    return [node for node in nodes if node.scope]


def parse_ir(path: str) -> Dict[str, IrNode]:
    """{scope key: node} of every node with a scope; a key seen twice keeps the node that has code."""
    full = check_path(path, kind="file", what="--ir", allow_symlink=True)
    try:
        with open(full, encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError as exc:
        raise ParseError(f"--ir '{path}' cannot be read: {exc.strerror}.") from None
    nodes = _nodes(lines)
    if not nodes:
        raise ParseError(f"--ir '{path}' holds no graph node with a scope; give an IR file written by "
                         "save_graphs, such as graph_build_0_*.ir.")
    forward_code = {node.unique_id: node.code for node in nodes if node.unique_id and node.code}
    by_key: Dict[str, IrNode] = {}
    for node in nodes:
        if node.scope.startswith("Gradients") and node.forward_unique_id in forward_code:
            node.code = list(forward_code[node.forward_unique_id])
        key = scope_key(node.scope)
        if key not in by_key or (node.code and not by_key[key].code):
            by_key[key] = node
    return by_key
