"""What the pairs of one job share: a memo per pair of table structures (templates.py), for what a compare
takes from the rows' structure alone and would otherwise make again at every rank."""
from msprobe.core.io.load import MODE_TENSOR

__all__ = ["structure_memo", "memoized"]

_MEMOS: list = []  # [(npu structure, bench structure, options, memo)], the latest first
_MEMO_CAPACITY = 4


def structure_memo(npu, bench, mode, options):
    """A dict shared by every statistics-mode compare of two tables of these structures (templates.py:
    equal in every column but the statistics) under these options, for what depends on nothing else:
    row matching, kinds, phases, epsilons, row names. None where a table has no structure (read alone)
    or the mode reads more than the tables (tensor files)."""
    if npu.structure is None or bench.structure is None or mode == MODE_TENSOR or options is None:
        return None
    for index, (npu_structure, bench_structure, seen_options, memo) in enumerate(_MEMOS):
        if npu_structure == npu.structure and bench_structure == bench.structure and seen_options is options:
            if index:
                _MEMOS.insert(0, _MEMOS.pop(index))
            return memo
    _MEMOS.insert(0, (npu.structure, bench.structure, options, {}))
    del _MEMOS[_MEMO_CAPACITY:]
    return _MEMOS[0][3]


def memoized(memo, key, make):
    """memo[key], made by make() the first time; make() alone without a memo."""
    if memo is None:
        return make()
    if key not in memo:
        memo[key] = make()
    return memo[key]
