"""1.2.1's documented verdicts on compared rows: 'Accuracy Reached or Not', statistics Result, red/yellow
highlight rules; and the gate that lets the dtype-aware judgement (`tolerance`) overrule the relative rules.

All rules work on numbers and reason codes, vectorised over rows; rules that compare an output with the
inputs of the same call group rows by entry (inputs = input and parameters rows, outputs = output
rows). A red row shows only its red reasons (as in the reference); yellow rules apply to the
remaining output rows. Highlight reasons are keys ('red', 'relative') that `render` turns into text.
"""
import numpy as np

from msprobe.core.compare.reasons import Reason

__all__ = ["accuracy_verdicts", "statistics_results", "highlight", "gate_highlights", "as_numbers", "RED", "YELLOW",
           "NO_COLOR", "RED_MESSAGES", "YELLOW_MESSAGES", "ABSOLUTE_RULES"]

NO_COLOR, YELLOW, RED = 0, 1, 2
RED_MESSAGES = {
    "nan_inf": "The maximum or minimum of the NPU data is nan, inf or -inf",
    "huge_abs": "The maximum absolute error exceeds 1e+10",
    "thousandth": "The input/parameters's one thousandth err ratio exceeds 0.9, while the output's is below 0.6",
    "relative": "The output's maximum relative error exceeds 0.5",
}
YELLOW_MESSAGES = {
    "abs_growth": "The output's maximum absolute error exceeds 1 and is over 10 times the input/parameters's",
    "thousandth": "The output's one thousandth err ratio decreases by more than 0.1 compared to the "
                  "input/parameters's",
    "relative": "The output's maximum relative error exceeds 0.1, while the input/parameters's is below 0.01",
    "cosine": "The output's cosine decreases by more than 0.1 compared to the input/parameters's",
}


def as_numbers(values):
    """Metric cells -> float array; text markers ('N/A', 'unsupported', ...) become NaN."""
    return np.array([v if isinstance(v, (int, float)) and not isinstance(v, bool) else np.nan for v in values],
                    dtype=np.float64)


def accuracy_verdicts(cosine, max_abs, reason):
    """Tensor-mode 'Accuracy Reached or Not' per the reference rules: 'No' when Cosine < 0.99 and
    MaxAbsErr > 0.001, or Cosine < 0.9, or MaxAbsErr > 1, or Cosine is NaN (one side all zeros), or
    NaN/Inf sit at different places; a 0-d tensor is 'No' only when MaxAbsErr > 1; 'Unmatched' for
    different shapes; 'None' where nothing was computed; 'Yes' otherwise."""
    cosine, max_abs = np.asarray(cosine, dtype=np.float64), np.asarray(max_abs, dtype=np.float64)
    reason = np.asarray(reason)
    verdict = np.full(len(cosine), "None", dtype=object)
    with np.errstate(invalid="ignore"):
        bad = ((cosine < 0.99) & (max_abs > 0.001)) | (cosine < 0.9) | (max_abs > 1) | np.isnan(cosine)
        ok = reason == Reason.OK
        verdict[ok] = np.where(bad[ok], "No", "Yes")
        verdict[(reason == Reason.ZERO_DIM) & (max_abs > 1)] = "No"
    verdict[reason == Reason.NAN_POSITION] = "No"
    verdict[reason == Reason.SHAPE_MISMATCH] = "Unmatched"
    return verdict


def statistics_results(relative, matched):
    """'Warning' where any of the four relative errors exceeds 0.5, '' otherwise, 'N/A' if unmatched."""
    if len(relative) == 0:
        return np.zeros(0, dtype=object)
    warn = np.nan_to_num(relative, nan=0.0).max(axis=1) > 0.5
    result = np.where(warn, "Warning", "").astype(object)
    result[~matched] = "N/A"
    return result


def _group_reduce(reduce, fill, entry_ids, n_groups, values, mask):
    out = np.full(n_groups, fill)
    valid = mask & ~np.isnan(values)
    reduce.at(out, entry_ids[valid], values[valid])
    return out[entry_ids]


def highlight(entry_ids, roles, nonfinite_npu, max_abs, output_relative, cosine=None, thousandth=None,
              is_tensor=None):
    """Colour (0/1/2) and reason keys per row (('red' | 'yellow', rule), see RED_MESSAGES / YELLOW_MESSAGES).

    entry_ids: int per row (rows of one call share an id); roles: role per row; nonfinite_npu: the
    NPU max or min is nan/inf; max_abs: max abs error (tensor) or |Max diff| (statistics);
    output_relative: |Max diff| / max(0.01, |Bench max|); cosine, thousandth: tensor metrics or None;
    is_tensor: bool per row (None: all rows are tensors). An input-versus-output rule fires when any
    input of the call meets its input condition (as in the reference); scalar arguments are no
    evidence that "the inputs agree", so the relative-error rule looks at tensor inputs only.
    """
    n = len(entry_ids)
    color = np.zeros(n, dtype=np.int8)
    reasons = [[] for _ in range(n)]
    if n == 0:
        return color, reasons
    groups = int(entry_ids.max()) + 1
    is_out = roles == "output"
    is_in = (roles == "input") | (roles == "parameters")

    def flag(mask, level, key):
        if level == YELLOW:
            mask = mask & (color < RED)
        for i in np.flatnonzero(mask):
            if key not in reasons[i]:
                reasons[i].append(key)
        color[mask] = np.maximum(color[mask], level)

    with np.errstate(invalid="ignore"):
        flag(nonfinite_npu, RED, ("red", "nan_inf"))
        flag(max_abs > 1e10, RED, ("red", "huge_abs"))
        if thousandth is not None:
            in_th = _group_reduce(np.maximum, -np.inf, entry_ids, groups, thousandth, is_in)
            flag(is_out & (in_th > 0.9) & (thousandth < 0.6), RED, ("red", "thousandth"))
        else:
            flag(is_out & (output_relative > 0.5), RED, ("red", "relative"))
        big_in = _group_reduce(np.minimum, np.inf, entry_ids, groups, np.where(max_abs > 1, max_abs, np.nan), is_in)
        flag(is_out & (max_abs > 1) & np.isfinite(big_in) & (max_abs > 10 * big_in), YELLOW, ("yellow", "abs_growth"))
        if thousandth is not None:
            flag(is_out & (in_th - thousandth > 0.1), YELLOW, ("yellow", "thousandth"))
        tensor_in = is_in if is_tensor is None else is_in & is_tensor
        in_rel_min = _group_reduce(np.minimum, np.inf, entry_ids, groups, output_relative, tensor_in)
        flag(is_out & (output_relative > 0.1) & (in_rel_min < 0.01), YELLOW, ("yellow", "relative"))
        if cosine is not None:
            in_cos = _group_reduce(np.maximum, -np.inf, entry_ids, groups, cosine, is_in)
            flag(is_out & np.isfinite(in_cos) & (in_cos - cosine > 0.1), YELLOW, ("yellow", "cosine"))
    return color, reasons


ABSOLUTE_RULES = frozenset({("red", "nan_inf"), ("red", "huge_abs")})


def gate_highlights(color, reasons, within_tolerance):
    """Drop the relative rules (everything but nan/inf and the 1e+10 error) from rows the dtype-aware
    judgement finds within tolerance: their difference is what the dtypes explain. Returns
    (color, reasons, overruled) where overruled[i] lists the rule keys dropped from row i."""
    color = color.copy()
    overruled = [[] for _ in range(len(color))]
    for i in np.flatnonzero(np.asarray(within_tolerance) & (color > 0)):
        kept = [key for key in reasons[i] if key in ABSOLUTE_RULES]
        overruled[i] = [key for key in reasons[i] if key not in ABSOLUTE_RULES]
        reasons[i] = kept
        color[i] = RED if kept else NO_COLOR
    return color, reasons, overruled
