"""Dtype-aware judgement: is a row's difference more than the precision of the two sides explains?

Every difference is measured in epsilons of the lower-precision side and in units of the tensor's own
magnitude, so a Min of 0 against 1e-11 in a tensor whose values are around 0.5 is 2e-11 / (eps * 0.5)
epsilons (nothing), while a 1 % scale fault in an fp32 run is 0.01 / 2^-23 = 84,000 epsilons.

    magnitude   rms = Norm / sqrt(element count) of the bench tensor (the typical element size)
    Max, Min    |npu - bench| / (eps * max(|bench value|, rms))
    Mean        |npu - bench| / (eps * rms)
    Norm        |npu - bench| / (eps * |bench Norm|)
    tensor      ||npu - bench|| / (eps * ||bench||)            (tensor mode only, from the tensor files)

`eps` is the coarser of the two sides' epsilons, where a side's epsilon is that of the row's dtype or
of the lowest-precision float dtype its run used (for at least 5 % of its float tensors), whichever is
coarser: a float32 tensor of a bf16 run (an RMSNorm upcast) still carries bf16 rounding, while one norm
computed in fp16 inside an fp32 run does not make the whole run fp16. Integer and bool tensors have epsilon 0: any
difference is suspicious. A row is suspicious when a score exceeds its allowance (in epsilons):

    dtypes     Max  Min  Mean  Norm  tensor
    same        4    4    1     1     4      "a few ulps": both sides round, in the same way
    mixed       2    2    0.5   0.5   2      only the lower-precision side rounds

Aggregates (Mean, Norm) get tighter allowances than single elements because rounding errors of many
elements average out, while a fault (a scale, a wrong constant) moves them all the same way; the Mean
and Norm of a single element (a 0-d loss) are that element and get its allowance.
Gradients carry the rounding of the forward pass and of the backward pass: rows of backward calls and
parameter gradients get 4 times these allowances, and rows recorded after the backward pass (the
optimizer step, which squares gradients) 8 times.
Fills at a dtype's extremes are not errors: a causal mask filled with `finfo(dtype).min` holds
-3.39e38 in bf16 and -3.40e38 in fp32, the same "minus infinity" spelled in each side's dtype.
`same_fill` finds such pairs (both sides at a float dtype's largest finite magnitude, same sign);
statistics, scalar arguments and tensor elements that are the same fill compare as equal.
An optimizer's normalized update (Adam's `param.addcdiv_(m, d, value=-step)`, recorded after the
backward pass) is judged by what it does to the parameter, not by its output's relative error: Adam
moves each element by at most about |step|, and where a gradient is zero up to rounding (the key bias
of attention, whose gradient is mathematically zero) the sign of that move is rounding noise. Two
clean sides may then differ by up to 2 |step| per element; `update_scores` rescales the update's
checks so that exactly this is the allowance (|diff| beyond what the parameter input carried, against
2 |step| for Max/Min/Mean and 2 |step| sqrt(n) for Norm and the tensor error norm). A wrong step size,
beta or epsilon shows as a differing argument of the optimizer's calls and is judged as usual.
Statistics another tool computed (a mindstudio-probe 26.x dump against msprobe's, normalise.py) are the
same Max and Min, but a Mean and Norm summed in another order: their allowances grow by log2(element
count), the rounding of a sum in another order (26.x's Norm of one fp32 tensor is msprobe's within 1-2
epsilons), and an integer tensor's Mean and Norm (float sums of exact numbers, in float32 by one tool and
float64 by another) are not judged.
All functions are pure and vectorised over rows.
"""
from collections import Counter
from typing import NamedTuple

import numpy as np

__all__ = ["dtype_epsilon", "run_epsilon", "epsilon_name", "statistic_scores", "tensor_scores", "judge_rows",
           "Judgement", "update_scores", "cross_tool_allowance", "same_fill", "FILL_MAGNITUDES",
           "STATISTICS", "ALLOWED_SAME", "ALLOWED_MIXED", "PHASE_FACTOR", "AMPLIFICATION", "CHECKS"]

STATISTICS = ("Max", "Min", "Mean", "Norm")
CHECKS = STATISTICS + ("tensor",)
ALLOWED_SAME = np.array([4.0, 4.0, 1.0, 1.0, 4.0])
ALLOWED_MIXED = np.array([2.0, 2.0, 0.5, 0.5, 2.0])
AMPLIFICATION = 4.0  # the advisor: an output difference of a call's own exceeds 4x what its inputs carried
PHASE_FACTOR = np.array([1.0, 4.0, 4.0, 8.0])  # forward, backward, parameters_grad, after backward

_FLOAT_EPSILON = {"float64": 2.0 ** -52, "double": 2.0 ** -52, "float32": 2.0 ** -23, "float": 2.0 ** -23,
                  "float16": 2.0 ** -10, "half": 2.0 ** -10, "bfloat16": 2.0 ** -7,
                  "float8_e4m3fn": 2.0 ** -3, "float8_e5m2": 2.0 ** -2}
_EXACT = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool", "long", "int",
          "short", "char", "byte"}
_NAMES = {2.0 ** -52: "fp64", 2.0 ** -23: "fp32", 2.0 ** -10: "fp16", 2.0 ** -7: "bf16", 2.0 ** -3: "fp8",
          2.0 ** -2: "fp8", 0.0: "integer"}


# the largest finite magnitude of each float dtype (fp16, bf16, fp32, fp64): what finfo(dtype).min/max fill
FILL_MAGNITUDES = np.array([65504.0, 3.3895313892515355e38, 3.4028234663852886e38, 1.7976931348623157e308])


def same_fill(npu, bench):
    """Bool (elementwise): both values are a float dtype's largest finite magnitude with the same sign
    (finfo(dtype).min or .max written in each side's dtype), so they are the same fill."""
    npu, bench = np.asarray(npu, dtype=np.float64), np.asarray(bench, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        return (np.isin(np.abs(npu), FILL_MAGNITUDES) & np.isin(np.abs(bench), FILL_MAGNITUDES)
                & (np.sign(npu) == np.sign(bench)))


def dtype_epsilon(dtype):
    """Machine epsilon of a dump's dtype text ('torch.bfloat16', 'BFloat16', 'float32'); 0.0 for integer
    and bool dtypes (exact); None for anything else (non-tensor values, unknown dtypes)."""
    if not isinstance(dtype, str):
        return None
    key = dtype.rsplit(".", 1)[-1].lower()
    if key in _FLOAT_EPSILON:
        return _FLOAT_EPSILON[key]
    if key in _EXACT:
        return 0.0
    return None


def epsilon_name(eps):
    """'bf16', 'fp32', ... for an epsilon dtype_epsilon returned."""
    return _NAMES.get(float(eps), f"eps={eps:.3g}")


RUN_SHARE = 0.05  # a float dtype sets a run's precision when it holds at least 5 % of its float tensors


def run_epsilon(dtypes):
    """The coarsest float epsilon among a run's dtypes (one per tensor row; 0.0 when the run holds no
    float tensor). A dtype held by fewer than RUN_SHARE of the float tensors (an fp32 run with one norm
    computed in fp16) is a local precision change, not the run's precision: its own rows are judged at
    its epsilon, but it does not lower the tolerance of every other row."""
    counts = Counter(dtypes)
    floats = {d: n for d, n in counts.items() if dtype_epsilon(d)}
    total = sum(floats.values())
    return max([dtype_epsilon(d) for d, n in floats.items() if n >= RUN_SHARE * total], default=0.0)


def _scores(diff, scale, eps):
    """|diff| / (eps * scale), with 0 for no difference and inf where nothing explains a difference."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        scores = np.abs(diff) / (eps * scale)
    scores[diff == 0] = 0.0
    unexplained = (diff != 0) & ~np.isnan(diff) & ((eps * scale == 0) | ~np.isfinite(scale))
    scores[unexplained] = np.inf
    return scores


def statistic_scores(npu_stats, bench_stats, numel, eps):
    """(rows, 4) scores of Max, Min, Mean, Norm in epsilons of the tensor's magnitude (NaN: not judged).

    npu_stats, bench_stats: (rows, 4) floats, NaN where the dump left a statistic out; numel: element
    count per row; eps: epsilon per row. Equal values, and the same inf/nan on both sides, score 0;
    a non-finite value against a finite one scores inf.
    """
    npu_stats = np.asarray(npu_stats, dtype=np.float64).reshape(-1, 4)
    bench_stats = np.asarray(bench_stats, dtype=np.float64).reshape(-1, 4)
    eps = np.asarray(eps, dtype=np.float64)[:, None]
    with np.errstate(invalid="ignore", over="ignore"):
        diff = npu_stats - bench_stats
        rms = np.abs(bench_stats[:, 3]) / np.sqrt(np.maximum(np.asarray(numel, dtype=np.float64), 1.0))
    rms = np.where(np.isfinite(rms), rms, 0.0)
    scale = np.empty_like(bench_stats)
    scale[:, 0] = np.maximum(np.abs(bench_stats[:, 0]), rms)
    scale[:, 1] = np.maximum(np.abs(bench_stats[:, 1]), rms)
    scale[:, 2] = rms
    scale[:, 3] = np.abs(bench_stats[:, 3])
    same_special = (npu_stats == bench_stats) | (np.isnan(npu_stats) & np.isnan(bench_stats))
    diff[same_special] = 0.0
    one_special = np.isfinite(npu_stats) != np.isfinite(bench_stats)
    absent = np.isnan(npu_stats) & np.isnan(bench_stats)
    scores = _scores(diff, scale, eps)
    scores[one_special] = np.inf
    scores[absent] = np.nan
    return scores


def tensor_scores(error_norm, bench_norm, eps):
    """||npu - bench|| / (eps * ||bench||) per row (NaN where the tensors were not compared)."""
    error_norm = np.asarray(error_norm, dtype=np.float64)
    scores = _scores(error_norm, np.asarray(bench_norm, dtype=np.float64), np.asarray(eps, dtype=np.float64))
    scores[np.isnan(error_norm)] = np.nan
    return scores


class Judgement(NamedTuple):
    """Per row: `scores` (rows, 5) in epsilons for CHECKS, `allowed` (rows, 5), `suspicious` (bool),
    `worst` (index into CHECKS of the check furthest over or nearest to its allowance, -1 when no check
    ran), `eps` (the epsilon used) and `mixed` (the sides' precisions differ)."""
    scores: np.ndarray
    allowed: np.ndarray
    suspicious: np.ndarray
    worst: np.ndarray
    eps: np.ndarray
    mixed: np.ndarray


def judge_rows(npu_stats, bench_stats, numel, npu_eps, bench_eps, tensor_error=None, tensor_bench_norm=None,
               phases=None, cross_tool=False):
    """The judgement of every row. npu_eps / bench_eps: each side's epsilon per row (NaN: the row is
    not a tensor of a known dtype, so it is not judged). tensor_error / tensor_bench_norm: tensor-mode
    norms per row, or None in statistics mode. phases: index into PHASE_FACTOR per row (None: forward).
    cross_tool: the two sides' statistics were computed by different tools (cross_tool_allowance)."""
    npu_eps = np.asarray(npu_eps, dtype=np.float64)
    bench_eps = np.asarray(bench_eps, dtype=np.float64)
    rows = len(npu_eps)
    known = ~np.isnan(npu_eps) & ~np.isnan(bench_eps)
    eps = np.where(known, np.fmax(npu_eps, bench_eps), np.nan)
    mixed = known & (npu_eps != bench_eps)
    scores = np.full((rows, len(CHECKS)), np.nan)
    scores[:, :4] = statistic_scores(npu_stats, bench_stats, numel, eps)
    if tensor_error is not None:
        scores[:, 4] = tensor_scores(tensor_error, tensor_bench_norm, eps)
    scores[~known] = np.nan
    allowed = np.where(mixed[:, None], ALLOWED_MIXED, ALLOWED_SAME)
    # an aggregate of one element (a 0-d loss) is that element: nothing averages out, so its Mean and
    # Norm are allowed what the element is
    single = np.broadcast_to(np.asarray(numel, dtype=np.float64), (rows,)) <= 1
    allowed[single, 2:4] = allowed[single, :1]
    if phases is not None:
        allowed = allowed * PHASE_FACTOR[np.asarray(phases, dtype=np.int64)][:, None]
    if cross_tool:
        allowed = allowed * cross_tool_allowance(numel, rows)
        scores[eps == 0, 2:4] = np.nan  # an integer tensor's Mean and Norm are float sums on each side
    with np.errstate(invalid="ignore"):
        ratio = scores / allowed
    judged = ~np.isnan(ratio).all(axis=1)
    worst = np.full(rows, -1, dtype=np.int64)
    worst[judged] = np.nanargmax(np.where(np.isnan(ratio[judged]), -1.0, ratio[judged]), axis=1)
    with np.errstate(invalid="ignore"):
        suspicious = np.nan_to_num(ratio, nan=0.0).max(axis=1) > 1.0 if rows else np.zeros(0, dtype=bool)
    return Judgement(scores, allowed, suspicious, worst, eps, mixed)


def cross_tool_allowance(numel, rows):
    """(rows, 5) factors on the allowances when another tool computed one side's statistics: its Mean and
    Norm sum the same elements in another order, and a sum of n floats in any order a pairwise or blocked
    reduction uses is within about log2(n) roundings of another order's; Max, Min and the tensor files
    are the same numbers whoever reads them."""
    factor = np.ones((rows, len(CHECKS)))
    count = np.broadcast_to(np.asarray(numel, dtype=np.float64), (rows,))
    factor[:, 2:4] = np.maximum(1.0, np.log2(np.maximum(count, 1.0)))[:, None]
    return factor


def update_scores(scores, allowed, diff, carried, step, numel):
    """Scores of optimizer update rows (rows, 5) after the update rule: the smaller of the dtype score
    and allowed * (|diff| - |carried|) / (2 |step| * (1, 1, 1, sqrt(n), sqrt(n))). diff, carried:
    (rows, 5) absolute differences of the update's output and of its parameter input (Max, Min, Mean,
    Norm, tensor error norm; NaN where unknown: the dtype score stands); step: |step| per row."""
    root = np.sqrt(np.maximum(np.asarray(numel, dtype=np.float64), 1.0))
    span = 2.0 * np.abs(np.asarray(step, dtype=np.float64))[:, None] * np.stack(
        [np.ones_like(root)] * 3 + [root, root], axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        own = np.maximum(np.abs(diff) - np.nan_to_num(np.abs(carried), nan=0.0), 0.0)
        by_step = allowed * own / span
    return np.where(np.isnan(by_step) | (span == 0), scores, np.fmin(scores, by_step))
