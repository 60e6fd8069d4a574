"""Discrete choices made from float inputs: a difference there is rounding amplified, not a cause.

Some calls choose instead of computing: relu keeps an element or drops it by its sign, top-k keeps
the k largest. Where the choice is made from values that agree within rounding (an element within its
rounding of 0, two router logits that tie), the two sides may choose differently although every input
agrees; what differs then is a selection, not an error of the call:

- relu's backward is the incoming gradient G where the forward's input x was positive. An element of x
  within its own rounding of 0 may have the other sign on the other side, and there G passes on one
  side only. The difference is at most ||dG|| + sqrt(m) max|G|, where m is the number of elements of x
  within their rounding (s_x + 1/2) eps rms(x) of 0: the dump does not hold that count, so it is
  estimated as if x had a normal distribution with its rms (density at 0 of 0.4 / rms; 2 x 0.4 is
  rounded up to 1: m = n (s_x + 1/2) eps, at least 1). A wrong relu backward that changes the
  gradient beyond that (a slope, a threshold) is still a cause. Statistics (Max, Min, Mean, Norm) do not
  see a flipped element inside the distribution, so in statistics mode the estimate also stands for the
  difference the gradient carries into the calls that read it (`carried_estimates`).
- top-k (and sort, max/min with a dimension, kthvalue, median, mode) returns values and their indices.
  Indices that differ while the values chosen agree within tolerance (and the inputs do) are a tie
  within rounding: the same values, found at other places. The index output is then amplified rounding,
  not a cause; the calls that use the indices (other experts of a mixture-of-experts) carry a
  difference and are its consequences. Indices whose values disagree are judged as before.
"""
import numpy as np

from msprobe.core.compare.memo import memoized

__all__ = ["SIGN_APIS", "INDEX_APIS", "selection_bounds", "tie_rows"]

SIGN_APIS = frozenset({"relu", "relu_"})
INDEX_APIS = frozenset({"topk", "sort", "max", "min", "kthvalue", "median", "mode"})
_FORWARD, _BACKWARD = 0, 1


def _api(parsed):
    return None if parsed is None or parsed.is_module else parsed.api.rsplit(".", 1)[-1]


def nan_max(values):
    """The largest of a few floats that are not NaN (None if all are): np.nanmax without its per-call cost."""
    finite_or_inf = [v for v in values.tolist() if v == v]
    return max(finite_or_inf) if finite_or_inf else None


def _carried(judgement, row):
    carried = nan_max(judgement.scores[row])
    return carried if carried is not None and np.isfinite(carried) else None


def _relu_rows(records, by_name):
    """[(relu backward output row, its incoming gradient's row, the forward input's row)]: the rows' structure
    alone decides (made once per structure in a job compare)."""
    found = []
    for row in np.flatnonzero(records.phases == _BACKWARD).tolist():
        entry = records.entries[row]
        if not isinstance(entry, str) or records.names[row] != f"{entry}.output.0" or not entry.endswith("backward") \
                or _api(records.parsed[row]) not in SIGN_APIS:
            continue
        grad_row = by_name.get(f"{entry}.input.0")
        x_row = by_name.get(entry[: -len("backward")] + "forward.input.0")
        if grad_row is not None and x_row is not None:
            found.append((row, grad_row, x_row))
    return found


def selection_bounds(records, judgement, bench_stats, numel, by_name):
    """{relu backward output row: bound of its difference in units of eps (absolute, like contraction's)}:
    ||dG|| + sqrt(m) max|G| with m the estimated count of elements of the forward's input within their
    rounding of 0."""
    bounds = {}
    for row, grad_row, x_row in memoized(records.extra.get("memo"), "relu rows", lambda: _relu_rows(records, by_name)):
        grad_s, x_s, eps = _carried(judgement, grad_row), _carried(judgement, x_row), judgement.eps[row]
        grad_max = nan_max(np.abs(bench_stats[grad_row, :2]))
        grad_norm, grad_max = bench_stats[grad_row, 3], np.nan if grad_max is None else grad_max
        if grad_s is None or x_s is None or not eps > 0 or not np.isfinite(grad_norm) or not np.isfinite(grad_max):
            continue
        flips = max(1.0, np.ceil(numel[x_row] * (x_s + 0.5) * eps))
        bounds[row] = (grad_s + 0.5) * grad_norm + np.sqrt(flips) * grad_max / eps
    return bounds


def _index_calls(records):
    """[(values output row, indices output row, input rows)] of the forward calls of INDEX_APIS: the rows'
    structure alone decides (made once per structure in a job compare)."""
    by_entry, entries, parsed = {}, records.entries, records.parsed
    for row in np.flatnonzero(records.phases == _FORWARD).tolist():
        entry = entries[row]
        if isinstance(entry, str) and _api(parsed[row]) in INDEX_APIS:
            by_entry.setdefault(entry, []).append(row)
    calls = []
    for entry, rows in by_entry.items():
        names = {records.names[r][len(entry) + 1:]: r for r in rows}
        values, indices = names.get("output.0"), names.get("output.1")
        if values is not None and indices is not None:
            calls.append((values, indices, [r for tail, r in names.items() if tail.startswith("input.")]))
    return calls


def tie_rows(records, judgement):
    """Index output rows (output.1 of top-k, sort, ...) that differ while the call's values output and
    its compared tensor inputs agree within tolerance: a tie within rounding, amplified, not a cause."""
    out = []
    for values, indices, candidates in memoized(records.extra.get("memo"), "index calls",
                                                lambda: _index_calls(records)):
        if not judgement.suspicious[indices]:
            continue
        inputs = [r for r in candidates if judgement.worst[r] >= 0]
        if judgement.worst[values] < 0 or judgement.suspicious[values] or not inputs \
                or judgement.suspicious[inputs].any():
            continue
        if judgement.eps[values] > 0 and judgement.eps[indices] == 0:  # float values, integer indices
            out.append(indices)
    return out
