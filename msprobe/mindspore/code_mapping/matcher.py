"""Find the IR scopes that a kernel name contains.

A kernel name is usually one scope key exactly (`Default_fc-Dense_MatMul-op0`); fused kernels join several.
Every key that occurs in the name counts, unless the digits go on after it (`..._Mul-op1` is not part of
`..._Mul-op12`). The keys form one Aho-Corasick automaton, so a name costs time linear in its length plus
the keys found, whatever the key lengths (walking back from every end of a 20,000-character name took
minutes).
"""
from collections import deque
from typing import Dict, List

from msprobe.mindspore.code_mapping.ir_parser import IrNode

__all__ = ["ScopeMatcher"]


class ScopeMatcher:
    def __init__(self, nodes: Dict[str, IrNode]):
        self._nodes = nodes
        self._goto: List[dict] = [{}]
        self._key: List[str] = [""]  # the key ending at a state, '' for none
        for key in nodes:
            state = 0
            for char in key:
                following = self._goto[state].get(char)
                if following is None:
                    following = len(self._goto)
                    self._goto.append({})
                    self._key.append("")
                    self._goto[state][char] = following
                state = following
            self._key[state] = key
        self._fail, self._output = self._links()

    def _links(self):
        """Failure links, and for each state the nearest state on its failure chain (itself included)
        where a key ends (-1 for none)."""
        goto, keys = self._goto, self._key
        fail, output = [0] * len(goto), [-1] * len(goto)
        queue = deque(goto[0].values())
        for state in queue:
            output[state] = state if keys[state] else -1
        while queue:
            state = queue.popleft()
            for char, child in goto[state].items():
                back = fail[state]
                while back and char not in goto[back]:
                    back = fail[back]
                fail[child] = goto[back].get(char, 0)
                output[child] = child if keys[child] else output[fail[child]]
                queue.append(child)
        return fail, output

    def match(self, name: str) -> List[IrNode]:
        """The nodes whose scope key occurs in `name`, in the order they appear, the longest first."""
        if name in self._nodes:
            return [self._nodes[name]]
        goto, fail, output, keys = self._goto, self._fail, self._output, self._key
        starts: Dict[str, int] = {}  # key -> start of its first occurrence
        state, last = 0, len(name) - 1
        for position, char in enumerate(name):
            while state and char not in goto[state]:
                state = fail[state]
            state = goto[state].get(char, 0)
            if position < last and char.isdigit() and name[position + 1].isdigit():
                continue  # a key cannot end inside a number
            found = output[state]
            # keys down the chain that are already known were all found with the first one: stop there
            while found >= 0 and keys[found] not in starts:
                starts[keys[found]] = position + 1 - len(keys[found])
                found = output[fail[found]]
        ordered = sorted(starts, key=lambda key: (starts[key], -len(key)))
        return [self._nodes[key] for key in ordered]
