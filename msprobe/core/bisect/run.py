"""One bisection: check that precision is the problem, search the culprits, write bisect_result.json."""
import math
import os
from typing import Any, Callable, Dict, FrozenSet, List, Optional, Tuple

from msprobe.core.bisect.search import Trials, find_culprits, narrow
from msprobe.core.errors import MsprobeError
from msprobe.core.log import logger
from msprobe.core.paths import atomic_write_json, make_dir

__all__ = ["BisectError", "bisect", "ROOT"]

#: the name of the whole model among module names (every module upcast: the all-float32 reference)
ROOT = ""


class BisectError(MsprobeError):
    """The bisection cannot start or cannot conclude (the message says why)."""


def bisect(run_trial: Callable[[FrozenSet[str]], float], top_level: List[str], children: Callable[[str], List[str]],
           output_dir: str, tolerance: Optional[float] = None, limit: int = 512) -> Dict[str, Any]:
    """`run_trial(names)` runs the user's target with the modules `names` upcast (ROOT: all) and returns the
    metric. The result (also written to output_dir/bisect_result.json) names the culprits and every trial."""
    output_dir = make_dir(output_dir, what="-o")
    reference = _checked(run_trial(frozenset([ROOT])), "all-float32")
    as_is = _checked(run_trial(frozenset()), "as-is")
    if tolerance is None:
        tolerance = 1e-2 * max(abs(reference), 1e-12)
    if not tolerance >= 0:
        raise BisectError(f"--tolerance must be a non-negative number, got {tolerance}.")
    result: Dict[str, Any] = {"metric_all_float32": reference, "metric_as_is": as_is, "tolerance": tolerance,
                              "culprits": [], "trials": []}

    def good(metric: float) -> bool:
        return math.isfinite(metric) and abs(metric - reference) <= tolerance

    trials = Trials(run=lambda names: _checked(run_trial(names), "trial"), good_metric=good, limit=limit)
    trials.log.extend([{"modules": ["(all)"], "metric": reference, "good": True},
                       {"modules": [], "metric": as_is, "good": good(as_is)}])
    trials.known(frozenset(), as_is)
    if good(as_is):
        result.update(conclusion=f"the as-is metric {as_is:.6g} is within {tolerance:.3g} of the all-float32 "
                                 f"metric {reference:.6g}: precision does not explain the difference",
                      trials=trials.log)
        return _write(result, output_dir)
    if not trials.good(top_level):
        result.update(conclusion="upcasting every top-level module does not reach the all-float32 metric: the "
                                 "difference lies in the model's own forward outside its submodules",
                      culprits=[ROOT], trials=trials.log)
        return _write(result, output_dir)
    try:
        culprits = narrow(trials, find_culprits(trials, top_level), children)
    except RuntimeError as exc:
        raise BisectError(f"{exc}; the metric may not be deterministic between trials.") from None
    final = trials.metric(frozenset(culprits))
    result.update(culprits=culprits, metric_with_culprits_upcast=final, trials=trials.log,
                  conclusion=f"upcasting {len(culprits)} module(s) brings the metric from {as_is:.6g} to {final:.6g} "
                             f"(all-float32: {reference:.6g}, tolerance {tolerance:.3g})")
    return _write(result, output_dir)


def _checked(value: Any, what: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise BisectError(f"the {what} run's evaluate() returned {str(value)[:60]!r}, not a number.") from None


def _write(result: Dict[str, Any], output_dir: str) -> Dict[str, Any]:
    path = os.path.join(output_dir, "bisect_result.json")
    atomic_write_json(path, result)
    logger.info("bisect wrote %s", path)
    result["path"] = path
    return result


def summary_lines(result: Dict[str, Any]) -> Tuple[str, ...]:
    lines = [f"bisect: as-is {result['metric_as_is']:.6g}, all-float32 {result['metric_all_float32']:.6g}, "
             f"tolerance {result['tolerance']:.3g}; {len(result['trials'])} trials.", result["conclusion"] + "."]
    lines += [f"  culprit: {name or '(the model itself)'}" for name in result["culprits"]]
    return tuple(lines + [f"result: {result['path']}"])
