"""Numbers for one parameter pair, computed chunk by chunk in float64 so no tensor is widened whole."""
import math
from typing import Any, Dict

import numpy as np

from msprobe.core.ckpt_compare.readers import StoredTensor, float_chunks

__all__ = ["pair_metrics", "STATUS_ORDER"]

# how bad each status is, worst first: a report lists differences before agreement
STATUS_ORDER = {"shape differs": 0, "only in ckpt1": 1, "only in ckpt2": 1, "differs": 2, "dtype differs": 2,
                "value differs": 2, "equal": 3, "value equal": 3}


def _finite(x):
    return None if x is None or not math.isfinite(x) else float(x)


def _norm(stored: StoredTensor) -> float:
    total = 0.0
    for part in float_chunks(stored):
        total += float(np.dot(part, part))
    return math.sqrt(total)


def pair_metrics(first: StoredTensor, second: StoredTensor) -> Dict[str, Any]:
    """shape/dtype/numel of both, their L2 norms, cosine, the relative L2 difference and norm ratio, max absolute
    and max relative difference, and a status.

    The relative L2 difference is ||a - b|| / max(||a||, ||b||) (0 when both are 0): it sees magnitude as well as
    direction (a weight scaled by 1.5 has cosine 1 and relative L2 difference 1/3) and lies in [0, 2]. The norm
    ratio is ||b|| / ||a|| (None when ||a|| is 0). The relative difference of an element is |a - b| / max(|a|, |b|)
    (0 where both are 0): it lies in [0, 2] and needs no epsilon. NaN on either side makes the pair `differs`
    unless both hold NaN at the same places."""
    row: Dict[str, Any] = {"shape1": list(first.shape), "shape2": list(second.shape), "dtype1": first.dtype,
                           "dtype2": second.dtype, "numel1": _numel(first), "numel2": _numel(second)}
    if first.raw is None or second.raw is None:
        equal = first.raw is None and second.raw is None and first.value == second.value
        row.update(status="value equal" if equal else "value differs", value1=_shown(first), value2=_shown(second))
        return row
    if tuple(first.shape) != tuple(second.shape):
        row.update(status="shape differs", l2_1=_norm(first), l2_2=_norm(second))
        return row
    dot = sq1 = sq2 = sq_diff = max_abs = max_rel = 0.0
    nan_mismatch = False
    for a, b in zip(float_chunks(first), float_chunks(second)):
        nan_a, nan_b = np.isnan(a), np.isnan(b)
        nan_mismatch |= bool((nan_a != nan_b).any())
        both = ~(nan_a | nan_b)
        a, b = a[both], b[both]
        with np.errstate(invalid="ignore", over="ignore"):
            dot += float(np.dot(a, b))
            sq1 += float(np.dot(a, a))
            sq2 += float(np.dot(b, b))
            diff = np.abs(a - b)
            sq_diff += float(np.dot(diff, diff))
            if diff.size:
                max_abs = max(max_abs, float(np.nanmax(diff)))
                scale = np.maximum(np.abs(a), np.abs(b))
                rel = np.divide(diff, scale, out=np.zeros_like(diff), where=scale > 0)
                max_rel = max(max_rel, float(np.nanmax(rel)))
    l2_1, l2_2 = math.sqrt(sq1), math.sqrt(sq2)
    if l2_1 == 0 and l2_2 == 0:
        cosine = 1.0
    elif l2_1 == 0 or l2_2 == 0:
        cosine = 0.0
    else:
        cosine = min(1.0, max(-1.0, dot / (l2_1 * l2_2)))
    largest = max(l2_1, l2_2)
    rel_l2 = math.sqrt(sq_diff) / largest if largest > 0 else 0.0
    identical = max_abs == 0 and not nan_mismatch
    status = "differs" if not identical else "equal" if first.dtype == second.dtype else "dtype differs"
    row.update(status=status, l2_1=_finite(l2_1), l2_2=_finite(l2_2), cosine=_finite(cosine),
               rel_l2_diff=_finite(rel_l2), norm_ratio=_finite(l2_2 / l2_1) if l2_1 > 0 else None,
               max_abs_diff=_finite(max_abs), max_rel_diff=_finite(max_rel), nan_mismatch=nan_mismatch)
    return row


def _numel(stored: StoredTensor):
    return None if stored.raw is None else int(stored.raw.size)


def _shown(stored: StoredTensor):
    text = repr(stored.value)
    return text if len(text) <= 200 else text[:197] + "..."
