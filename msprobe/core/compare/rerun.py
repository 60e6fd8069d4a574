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
    rerun_origin(tensor_dump_json, call, bench_dump_json, runner, k) -> the same, plus "call"

`rerun_origin` reads both dumps, checks the call (the forward or the backward of an API call) and drives a
framework's `CallRunner` (how to find the API, build the call's inputs from the saved files, run it and
fingerprint its results: pytorch/determinism.py, mindspore/determinism.py); this module holds everything
else, so the frameworks share one judgement.
"""
import json
import os
from typing import Callable, List, Optional, Protocol, Sequence

from msprobe.core.errors import CompareError
from msprobe.core.naming import EntryName, tensor_descriptors
from msprobe.core.paths import check_path

__all__ = ["NON_DETERMINISTIC", "DETERMINISTIC_DIFFERENT", "REPRODUCES_BASELINE", "CallRunner",
           "classify_reruns", "rerun_origin", "MAX_RERUNS"]

#: re-runs are in-process kernel calls; a bound keeps a typo (k=10**9) from running for days
MAX_RERUNS = 1000

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


class CallRunner(Protocol):
    """What a framework gives rerun_origin: only the parts that need the framework."""

    def resolve(self, prefix: str, api: str) -> Callable:
        """The API's callable, only through the allow-list of the APIs the dump wraps; random APIs refused
        (their difference is the RNG audit's, class `random`)."""

    def saved_fingerprint(self, tensor_dir: str, descriptor: dict) -> str:
        """The fingerprint (summary_mode "xor") of a tensor the dump saved (`data_name` in tensor_dir), in
        the recorded dtype."""

    def run_once(self, function: Callable, record: dict, call: str, tensor_dir: str,
                 backward_record: Optional[dict] = None) -> List[str]:
        """Build the forward call's inputs afresh from the saved files (an in-place call must not see the
        previous re-run's result), call `function`, and return the fingerprints of its output tensors in
        order. With `backward_record` (the backward entry: its "input" holds the saved output gradients),
        backpropagate those gradients instead and return the fingerprints of the input gradients, in
        argument order, as the backward entry's "output" lists them."""


def _load(path, what):
    path = check_path(path, kind="file", what=what, allow_symlink=True)
    try:
        with open(path, encoding="utf-8") as handle:
            return path, json.load(handle)
    except (OSError, ValueError) as exc:
        raise CompareError(f"{what} {path} cannot be read: {str(exc)[:200]}") from None


def descriptor_prints(node, key="xor"):
    """Fingerprints (`key`) of the tensor descriptors under node, in order."""
    return [d[key] for d in tensor_descriptors(node) if key in d]


def saved_descriptors(node):
    """The tensor descriptors under node that name a saved file (`data_name`), in order."""
    return [d for d in tensor_descriptors(node) if d.get("data_name")]


def _forward_name(call) -> EntryName:
    """The forward entry of an API call entry (forward or backward); CompareError for any other name."""
    name = EntryName.parse(call)
    if name is None or name.is_module or name.direction not in ("forward", "backward"):
        raise CompareError(f"{str(call)[:120]!r} is not the forward or backward of an API call; only those "
                           "can be re-run.")
    return EntryName(name.prefix, name.api, name.index, "forward", False)


def rerun_origin(tensor_dump_json, call, bench_dump_json, runner: CallRunner, k=5) -> dict:
    """Re-execute `call` (the forward or the backward entry of an API call) k times on the inputs the tensor
    dump of the run under test saved (a backward: the forward's inputs and the saved output gradients); judge
    the results' fingerprints against the good run's xor dump. Returns classify_reruns' verdict plus
    "call"."""
    if isinstance(k, bool) or not isinstance(k, int) or not 2 <= k <= MAX_RERUNS:
        raise CompareError(f"k must be an integer from 2 to {MAX_RERUNS} (re-runs to compare), not {k!r}")
    forward = _forward_name(call)
    path, dump = _load(tensor_dump_json, "tensor dump")
    _, bench = _load(bench_dump_json, "bench dump")
    data = dump.get("data") or {}
    record, bench_record, forward_record = data.get(call), (bench.get("data") or {}).get(call), data.get(str(forward))
    if not isinstance(record, dict) or not isinstance(bench_record, dict):
        raise CompareError(f"call {str(call)[:120]!r} is not in both dumps.")
    if not isinstance(forward_record, dict):
        raise CompareError(f"the tensor dump has no {forward}: its inputs are needed to re-run {call[:120]}.")
    baseline = descriptor_prints(bench_record.get("output"))
    if not baseline:
        raise CompareError(f"the bench dump has no fingerprint of {str(call)[:120]}'s outputs: give it a "
                           "dump with summary_mode \"xor\".")
    function = runner.resolve(forward.prefix, forward.api)
    tensor_dir = os.path.join(os.path.dirname(path), "dump_tensor_data")
    observed = [runner.saved_fingerprint(tensor_dir, d) for d in saved_descriptors(record.get("output"))]
    called = EntryName.parse(call)  # checked by _forward_name: a forward or backward entry
    backward_record = record if called is not None and called.direction == "backward" else None
    reruns = [runner.run_once(function, forward_record, str(forward), tensor_dir, backward_record)
              for _ in range(k)]
    return {"call": call, **classify_reruns(reruns, baseline, observed or None)}
