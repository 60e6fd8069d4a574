"""Delta debugging over named candidates: a smallest set whose upcast makes a trial good, in about log2(N)
trials per culprit, then narrowed down the module tree where a culprit's children explain it."""
from dataclasses import dataclass, field
from typing import Callable, Dict, FrozenSet, List, Sequence

__all__ = ["Trials", "find_culprits", "narrow"]


@dataclass
class Trials:
    """Runs a trial (the metric with a set of names upcast) at most once per set, and keeps the log."""
    run: Callable[[FrozenSet[str]], float]
    good_metric: Callable[[float], bool]
    log: List[Dict] = field(default_factory=list)
    limit: int = 512
    _cache: Dict[FrozenSet[str], float] = field(default_factory=dict)

    def metric(self, names: FrozenSet[str]) -> float:
        if names not in self._cache:
            if len(self._cache) >= self.limit:
                raise RuntimeError(f"bisection stopped after {self.limit} trials")
            value = self.run(names)
            self._cache[names] = value
            self.log.append({"modules": sorted(names), "metric": value, "good": self.good_metric(value)})
        return self._cache[names]

    def known(self, names: FrozenSet[str], value: float) -> None:
        """A metric measured outside the search (the as-is run) counts as that set's trial."""
        self._cache[names] = value

    def good(self, names) -> bool:
        return self.good_metric(self.metric(frozenset(names)))


def find_culprits(trials: Trials, candidates: Sequence[str], base: FrozenSet[str] = frozenset()) -> List[str]:
    """A smallest subset C of `candidates` with trials.good(base | C), given that base | candidates is good
    (classic divide and conquer: a half that suffices alone is searched alone; otherwise each half is searched
    with the other half, then with the culprits found, held upcast)."""
    if trials.good(base):
        return []
    if len(candidates) == 1:
        return list(candidates)
    middle = len(candidates) // 2
    first, second = list(candidates[:middle]), list(candidates[middle:])
    if trials.good(base | frozenset(first)):
        return find_culprits(trials, first, base)
    if trials.good(base | frozenset(second)):
        return find_culprits(trials, second, base)
    in_first = find_culprits(trials, first, base | frozenset(second))
    in_second = find_culprits(trials, second, base | frozenset(in_first))
    return in_first + in_second


def narrow(trials: Trials, culprits: List[str], children: Callable[[str], List[str]],
           depth_limit: int = 32) -> List[str]:
    """Replace each culprit by a smallest set of its children that does the same job, as deep as that holds."""
    result = list(culprits)
    for _ in range(depth_limit):
        changed = False
        for n, name in enumerate(result):
            kids = children(name)
            if not kids:
                continue
            others = frozenset(result[:n] + result[n + 1:])
            if not trials.good(others | frozenset(kids)):
                continue  # the culprit's own code (not only its children) needs float32
            found = find_culprits(trials, kids, others)
            result[n:n + 1] = found
            changed = True
            break
        if not changed:
            return result
    return result


