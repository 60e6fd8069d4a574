"""Preheat (`if_preheat`): learn a threshold per API and dtype in the first `preheat_step` steps.

Some APIs are accurate and still sensitive to any perturbation (a subtraction of nearly equal numbers
under bit_noise): with the fixed per-dtype threshold they would be reported on every call. Preheat
finds them:

* step 0 counts the calls of each API (n per step);
* steps 1 .. preheat_step-1 sample k = min(ceil(n / (preheat_step - 1)), max_sample) calls per API and
  step (different calls each step). For each sample the task measures the perturbation ratio and whether
  the original output agrees with the high-precision run (float32 on CPU) within the dtype's threshold;
* after each sampling step the threshold of the API and dtype becomes
      max(default, 1 + 2 * (largest ratio of an accurate sample - 1)),
  lowered to max(default, 1 + (smallest ratio of an inaccurate sample - 1) / 2) when that would hide an
  inaccurate sample. An API whose perturbation ratios are large only where it is accurate stops being
  reported; an inaccurate API stays reported.

No rows are written during preheat; from step `preheat_step` on every call is checked with the learnt
thresholds (the default where nothing was learnt).
"""
import math
from collections import defaultdict
from typing import Dict, List, Tuple

__all__ = ["Preheat"]


class Preheat:
    def __init__(self, preheat_step: int, max_sample: int) -> None:
        self.preheat_step = preheat_step
        self.max_sample = max_sample
        self.calls_per_step: Dict[str, int] = defaultdict(int)     # counted in step 0
        self.seen: Dict[str, int] = defaultdict(int)                # calls of the current step
        self.samples: Dict[Tuple[str, str], List[Tuple[float, bool]]] = defaultdict(list)
        self.thresholds: Dict[Tuple[str, str], float] = {}
        self.step = 0

    def active(self, step: int) -> bool:
        return step < self.preheat_step

    def new_step(self, step: int) -> None:
        self.step = step
        self.seen.clear()

    def take_sample(self, api: str) -> bool:
        """Called once per call of `api` in a preheat step: whether this call is a sample."""
        index = self.seen[api]
        self.seen[api] = index + 1
        if self.step == 0:
            self.calls_per_step[api] += 1
            return False
        calls = self.calls_per_step.get(api, 0)
        if calls == 0:
            return False
        per_step = min(math.ceil(calls / max(self.preheat_step - 1, 1)), self.max_sample)
        first = ((self.step - 1) * per_step) % calls
        return (index - first) % calls < per_step

    def record(self, api: str, dtype: str, ratio: float, accurate: bool) -> None:
        self.samples[(api, dtype)].append((ratio, accurate))

    def adapt(self, default_of) -> None:
        """After a sampling step: recompute the thresholds (`default_of(dtype)` is the fixed one)."""
        for (api, dtype), samples in self.samples.items():
            default = default_of(dtype)
            good = [r for r, accurate in samples if accurate and r == r]
            bad = [r for r, accurate in samples if not accurate and r == r]
            limit = max(default, 1 + 2 * (max(good) - 1)) if good else default
            if bad and min(bad) <= limit:
                limit = max(default, 1 + (min(bad) - 1) / 2)
            self.thresholds[(api, dtype)] = limit

    def threshold(self, api: str, dtype: str, default: float) -> float:
        return self.thresholds.get((api, dtype), default)
