"""Linear-layer gradients whose difference is their operands' rounding amplified by cancellation.

A linear layer's backward computes three contractions from the incoming gradient G (tokens x out), the
forward's input X (tokens x in) and weight W (out x in):

    grad input    dX = G W        ||dX - dX'|| <= ||dG|| ||W|| + ||G|| ||dW_||
    grad weight   dW = G^T X      ||dW - dW'|| <= ||dG|| ||X|| + ||G|| ||dX_||
    grad bias     db = sum_t G_t  ||db - db'|| <= sqrt(tokens) ||dG||

(Cauchy-Schwarz; dA is an operand's difference between the sides). Where the terms of the sum cancel
(a bias feeding a LayerNorm has a gradient that is zero up to rounding; a weight gradient summing
tokens of opposite sign) the result is far smaller than the bound's scale and its relative difference
is large although every operand agrees: a difference of the operands amplified by cancellation, not
a cause. An operand carrying `s` epsilons of difference relative to its own norm (its largest judged
score, plus 1/2 for its own rounding) gives ||dA|| = (s + 1/2) eps ||A||. Every check of the output
(Max, Min, Mean, Norm, tensor error) is bounded by the Frobenius norm of the output's difference; the
bound is expressed in each check's own units (eps times the check's scale). A row holding the same
tensor (the same four statistics on both sides: the parameter's gradient row, the optimizer reading
that gradient) gets the same bound. The advisor (and the graph's AMPLIFIED level) counts an output
within the bound as amplified rounding and the calls reading it as its consequences; the row's
judgement (its colour) is unchanged: the difference is real, only not a cause. The bound uses only
the dump (Norms, shapes, the forward's rows), no per-model constant.
"""
import numpy as np

from msprobe.core.naming import parse_name

__all__ = ["explained_epsilons", "CONTRACTION_APIS"]

CONTRACTION_APIS = frozenset({"linear", "Dense"})  # MindSpore mint.nn.Linear: Primitive.dense.Dense
_BACKWARD = 1


def _rows_by_name(records):
    return {name: row for row, name in enumerate(records.names)}


def _operand(judgement, bench_stats, row):
    """(carried epsilons incl. own rounding, bench Norm) of an operand row, or None when unknown."""
    if row is None:
        return None
    norm = bench_stats[row, 3]
    if not np.isfinite(norm):
        return None
    scores = judgement.scores[row]
    carried = float(np.nanmax(scores)) if not np.isnan(scores).all() else 0.0
    return (carried if np.isfinite(carried) else np.inf) + 0.5, float(norm)


def _bounds(records, judgement, bench_stats, numel):
    """{output row: Frobenius bound of its difference, in units of eps} of linear backward outputs."""
    by_name, bounds = _rows_by_name(records), {}
    entries = records.entries
    for row in np.flatnonzero(records.phases == _BACKWARD).tolist():
        entry, name = entries[row], records.names[row]
        parsed = parse_name(entry) if isinstance(entry, str) else None
        if parsed is None or parsed.api.rsplit(".", 1)[-1] not in CONTRACTION_APIS:
            continue
        tail = name[len(entry) + 1:]
        if tail not in ("output.0", "output.1", "output.2"):
            continue
        forward = entry[: -len("backward")] + "forward" if entry.endswith("backward") else None
        grad = _operand(judgement, bench_stats, by_name.get(f"{entry}.input.0"))
        if grad is None or forward is None:
            continue
        if tail == "output.2":
            shape = records.column("bench", "shape_key")[by_name[f"{entry}.input.0"]]
            tokens = numel[by_name[f"{entry}.input.0"]] / (shape[-1] if shape else 1)
            bounds[row] = grad[0] * np.sqrt(max(tokens, 1.0)) * grad[1]
            continue
        other = _operand(judgement, bench_stats, by_name.get(f"{forward}.input.{1 if tail == 'output.0' else 0}"))
        if other is not None:
            bounds[row] = (grad[0] + other[0]) * grad[1] * other[1]
    return bounds


def _same_tensors(bounds, stats):
    """The bounds extended to every row holding the same tensor as a bounded output (the parameter's
    gradient row, the optimizer reading that gradient): the same Max, Min, Mean and Norm on both sides."""
    npu, bench = (np.nan_to_num(s, nan=-1.0, posinf=-2.0, neginf=-3.0) for s in stats)
    keys = {}
    for row, bound in bounds.items():
        keys[npu[row].tobytes() + bench[row].tobytes()] = bound
    out = dict(bounds)
    for row in range(len(npu)):
        key = npu[row].tobytes() + bench[row].tobytes()
        if row not in out and key in keys and np.isfinite(stats[1][row, 3]) and stats[1][row, 3] != 0:
            out[row] = keys[key]
    return out


def explained_epsilons(records, judgement, stats, numel):
    """(rows, 5) epsilons of each check that the operands of a linear backward output explain (0 for
    every other row): the advisor counts an output within them as amplified rounding, not a cause.
    The judgement (the row's colour) is left as it is: the difference is real, only not a cause."""
    out = np.zeros(judgement.scores.shape)
    bench_stats = stats[1]
    bounds = _bounds(records, judgement, bench_stats, numel)
    if not bounds:
        return out
    bounds = _same_tensors(bounds, stats)
    rows = np.fromiter(bounds, dtype=np.int64)
    bound = np.fromiter(bounds.values(), dtype=np.float64)
    bench = bench_stats[rows]
    with np.errstate(invalid="ignore", divide="ignore"):
        rms = np.abs(bench[:, 3]) / np.sqrt(np.maximum(numel[rows], 1.0))
        scale = np.stack([np.fmax(np.abs(bench[:, 0]), rms), np.fmax(np.abs(bench[:, 1]), rms),
                          np.abs(bench[:, 3]), np.abs(bench[:, 3]), np.abs(bench[:, 3])], axis=1)
        explained = bound[:, None] / scale
    out[rows] = np.where(np.isfinite(explained), explained, 0.0)
    return out
