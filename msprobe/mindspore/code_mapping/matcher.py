"""Find the IR scopes that a kernel name contains.

A kernel name is usually one scope key exactly (`Default_fc-Dense_MatMul-op0`); fused kernels join several.
Every key that occurs in the name counts, unless the digits go on after it (`..._Mul-op1` is not part of
`..._Mul-op12`). Keys are kept in a trie of reversed keys, so each name costs time in its own length only.
"""
from typing import Dict, List

from msprobe.mindspore.code_mapping.ir_parser import IrNode

__all__ = ["ScopeMatcher"]

_END = ""


class ScopeMatcher:
    def __init__(self, nodes: Dict[str, IrNode]):
        self._nodes = nodes
        self._reversed_trie: dict = {}
        for key in nodes:
            level = self._reversed_trie
            for char in reversed(key):
                level = level.setdefault(char, {})
            level[_END] = key

    def _keys_ending_at(self, name: str, end: int) -> List[str]:
        found, level = [], self._reversed_trie
        for position in range(end - 1, -1, -1):
            level = level.get(name[position])
            if level is None:
                break
            if _END in level:
                found.append(level[_END])
        return found

    def match(self, name: str) -> List[IrNode]:
        """The nodes whose scope key occurs in `name`, in the order they appear, the longest first."""
        if name in self._nodes:
            return [self._nodes[name]]
        keys = []
        for end in range(len(name), 0, -1):
            if end < len(name) and name[end].isdigit() and name[end - 1].isdigit():
                continue  # a key cannot end inside a number
            keys += self._keys_ending_at(name, end)
        seen, ordered = set(), []
        for key in sorted(keys, key=lambda k: (name.find(k), -len(k))):
            if key not in seen:
                seen.add(key)
                ordered.append(self._nodes[key])
        return ordered
