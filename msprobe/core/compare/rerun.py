"""Re-run classification: is the origin call's difference a non-deterministic kernel or a different result?

The origin named by first_divergence.py is re-executed in-process k times on its saved inputs (a tensor dump
of the run under test); the fingerprints of the re-runs' outputs are compared with each other and with the
good run's (a fingerprint dump):

- "non-deterministic kernel": the re-runs disagree with each other;
- "deterministic, different result": they agree with each other but not with the good run: the kernel,
  library, thread count or hardware of this process computes something else, every time;
- "reproduces the good run": they agree with the good run: here the call is fine, so the run under test got
  its result from a state this re-run does not have (another thread count, another library, a race).

    classify_reruns([["ab..", ...], ...], baseline=["cd..", ...], observed=["ef..", ...]) -> {"class", ...}

Framework adapters run the call (pytorch/determinism.py); this module only judges the fingerprints.
"""
from typing import List, Optional, Sequence

__all__ = ["NON_DETERMINISTIC", "DETERMINISTIC_DIFFERENT", "REPRODUCES_BASELINE", "classify_reruns"]

NON_DETERMINISTIC = "non-deterministic kernel"
DETERMINISTIC_DIFFERENT = "deterministic, different result"
REPRODUCES_BASELINE = "reproduces the good run"


def classify_reruns(reruns: Sequence[Sequence[str]], baseline: Sequence[str],
                    observed: Optional[Sequence[str]] = None) -> dict:
    """reruns: the output fingerprints of each re-run; baseline: the good run's; observed: the run under
    test's (its saved outputs), when known. Returns {"class", "why", "reruns", "distinct", "baseline",
    "observed", "matches_observed"} (the evidence)."""
    runs: List[list] = [list(r) for r in reruns]
    distinct = len({tuple(r) for r in runs})
    base = list(baseline)
    if distinct > 1:
        kind, why = NON_DETERMINISTIC, f"{len(runs)} re-runs on the same inputs gave {distinct} different outputs"
    elif runs and runs[0] != base:
        kind, why = DETERMINISTIC_DIFFERENT, (f"{len(runs)} re-runs agree with each other but not with the good "
                                              "run: this kernel/library/hardware computes another result")
    else:
        kind, why = REPRODUCES_BASELINE, (f"{len(runs)} re-runs give the good run's output: the run under test "
                                          "computed it in a state this re-run does not have")
    matches = None if observed is None else sum(list(observed) == r for r in runs)
    return {"class": kind, "why": why, "reruns": runs, "distinct": distinct, "baseline": base,
            "observed": None if observed is None else list(observed), "matches_observed": matches}
