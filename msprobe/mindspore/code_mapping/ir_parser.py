"""Read a MindSpore IR file (`save_graphs`) into scope -> source lines, one entry per graph node.

A node starts with `%N(name) = Op(...)`; the comment lines that follow it give its scope
(`# Fullname with scope: (Default/fc-Dense/MatMul-op0)`) and its source lines (`# In file PATH:LINE, COLS/CODE/`).
Backward nodes (scope `Gradients/...`) carry `forward_unique_id`; they get the source lines of the forward
node with that `unique_id`, because their own lines point into MindSpore's autodiff machinery.
Text only: MindSpore is not imported.
"""
import re
from dataclasses import dataclass, field
from typing import Dict, List

from msprobe.core.errors import ParseError
from msprobe.core.paths import check_path

__all__ = ["IrNode", "parse_ir", "scope_key"]

_NODE = re.compile(r"^\s*%\d+\([^)]*\)\s*=\s*\S+\(")
_SCOPE = re.compile(r"^\s*#\s*Fullname with scope:\s*\((?P<scope>.*)\)\s*$")
_CODE = re.compile(r"^\s*#\s*(?P<code>In file .*?)/?\s*$")
_UNIQUE_ID = re.compile(r"cnode_primal_attrs:\s*\{[^}]*?\bunique_id:\s*\"(?P<id>\d+)\"")
_FORWARD_ID = re.compile(r"cnode_primal_attrs:\s*\{[^}]*?\bforward_unique_id:\s*\"(?P<id>\d+)\"")


@dataclass
class IrNode:
    scope: str
    code: List[str] = field(default_factory=list)
    unique_id: str = ""
    forward_unique_id: str = ""


def scope_key(scope: str) -> str:
    """The scope as it appears in kernel dump file names ('/' becomes '_')."""
    return scope.replace("/", "_")


def _nodes(lines: List[str]) -> List[IrNode]:
    nodes, current = [], None
    for line in lines:
        if _NODE.match(line):
            unique, forward = _UNIQUE_ID.search(line), _FORWARD_ID.search(line)
            current = IrNode("", unique_id=unique.group("id") if unique and not forward else "",
                             forward_unique_id=forward.group("id") if forward else "")
            nodes.append(current)
            continue
        if current is None:
            continue
        scope = _SCOPE.match(line)
        if scope:
            current.scope = scope.group("scope")
            continue
        code = _CODE.match(line)
        if code and current.scope:
            current.code.append(code.group("code"))
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
