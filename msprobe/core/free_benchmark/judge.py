"""Whether an API's output and its re-run on perturbed inputs agree: tolerances, thresholds, ratio metric.

    ratio, flipped = compare_outputs(original, perturbed, tolerance("float16", "forward"))
    max_rel = verdict(ratio, flipped, threshold("float16", "bit_noise"))   # None: they agree

The metric (msprobe 1.2.1's, spec 1.3): both outputs with magnitudes clamped below at `tol`; ratio =
max over elements of max(|a|/|b|, |b|/|a|); "symbol_flipping" when some a*b < -tol². A call is
reported when the ratio exceeds the threshold of the original output's dtype (the device under test).

`compare_outputs` works on numpy arrays and on torch tensors alike (operators and the methods
.clip/.max/.min/.all/.any only); the framework casts both outputs to one float dtype first.
Non-finite elements: the same inf, or nan, in both outputs is agreement; anything else gives ratio inf.

Noise modes (add_noise, bit_noise) move inputs by one unit in the last place of their dtype, so a healthy
API moves its output by a few units of the output's dtype at the tensor's scale: in bfloat16 one unit is
0.78 %, twice the 1.004 threshold. `compare_outputs(..., noise_eps=eps)` therefore first asks whether
every element changed by at most NOISE_ULPS units (eps * max(|element|, rms of the tensor)); such a
change is what the perturbation explains and counts as agreement (ratio 1). Only larger changes are
judged by the ratio and the threshold.
"""
import math
from typing import Optional, Tuple, Union

import numpy as np

__all__ = ["THRESHOLDS", "FORWARD_TOLERANCES", "BACKWARD_TOLERANCE", "dtype_key", "threshold", "tolerance",
           "compare_outputs", "verdict", "SYMBOL_FLIPPING", "NOISE_MODES", "NOISE_ULPS", "noise_epsilon",
           "noise_sized"]

SYMBOL_FLIPPING = "symbol_flipping"
#: reported when ratio > threshold (documented per output dtype; 1.0002 for every other dtype)
THRESHOLDS = {"float16": 1.002, "bfloat16": 1.004, "float32": 1.0002, "float64": 1.0002}
DEFAULT_THRESHOLD = 1.0002
#: magnitudes below this count as this (sqrt of the absolute tolerance of the dtype), forward stage
FORWARD_TOLERANCES = {"float16": 1e-3, "bfloat16": 1e-2, "float32": 1e-4, "float64": 1e-4}
BACKWARD_TOLERANCE = 1e-3
NOISE_MODES = ("add_noise", "bit_noise")
#: a one-ulp input perturbation may move an output element by this many ulps of the tensor's scale
NOISE_ULPS = 8
_EPSILON = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7, "float32": 2.0 ** -23, "float64": 2.0 ** -52}
_INF = float("inf")


def dtype_key(dtype_name: str) -> str:
    """'torch.float16' / 'Float16' / 'float16' -> 'float16'; 'BFloat16' -> 'bfloat16'."""
    return str(dtype_name).rsplit(".", 1)[-1].lower()


def threshold(dtype_name: str, pert_mode: str = "") -> float:
    """The largest ratio that still counts as agreement for an output of this dtype."""
    if pert_mode == "no_change":
        return 1.0  # the same inputs must give the same bits
    return THRESHOLDS.get(dtype_key(dtype_name), DEFAULT_THRESHOLD)


def tolerance(dtype_name: str, stage: str = "forward") -> float:
    if stage == "backward":
        return BACKWARD_TOLERANCE
    return FORWARD_TOLERANCES.get(dtype_key(dtype_name), FORWARD_TOLERANCES["float32"])


def noise_epsilon(dtype_name: str, pert_mode: str) -> Optional[float]:
    """The epsilon of the output's dtype for a noise mode (None: another mode or an unknown dtype)."""
    return _EPSILON.get(dtype_key(dtype_name)) if pert_mode in NOISE_MODES else None


def noise_sized(original, perturbed, eps: float, ulps: float = NOISE_ULPS) -> bool:
    """Whether every element moved by at most `ulps` * eps * max(|element|, rms of the tensor)."""
    with np.errstate(invalid="ignore", over="ignore"):
        rms = float(((perturbed * perturbed).mean()) ** 0.5)
        if not rms < _INF:
            return False
        allowed = abs(perturbed).clip(rms) * (eps * ulps)
        return bool((abs(original - perturbed) <= allowed).all())


def compare_outputs(original, perturbed, tol: float, noise_eps: Optional[float] = None) -> Tuple[float, bool]:
    """(ratio >= 1, symbol flipped) of two arrays of one shape and one float dtype; with `noise_eps`
    (a noise mode), a change of noise size is agreement: (1.0, False)."""
    if tuple(original.shape) != tuple(perturbed.shape):
        return _INF, False
    if _size(original) == 0:
        return 1.0, False
    if noise_eps is not None and noise_sized(original, perturbed, noise_eps):
        return 1.0, False
    # few passes over the data: an inf/nan on either side shows as a non-finite extreme of the quotient
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):  # inf/nan are handled below
        quotient = abs(original).clip(tol) / abs(perturbed).clip(tol)
        highest, lowest = float(quotient.max()), float(quotient.min())
    if not (highest < _INF and lowest > 0):  # nan fails both tests
        return _compare_non_finite(_numpy(original), _numpy(perturbed), tol)
    ratio = max(highest, 1.0 / lowest)
    with np.errstate(over="ignore"):
        if bool((original * perturbed < -tol * tol).any()):
            return 1.0, True
    return ratio, False


def verdict(ratio: float, flipped: bool, limit: float) -> Optional[Union[float, str]]:
    """max_rel of a reported call (ratio - 1, or "symbol_flipping"), None when the outputs agree."""
    if flipped:
        return SYMBOL_FLIPPING
    if ratio > limit or math.isnan(ratio):
        return ratio - 1.0
    return None


def _size(array) -> int:
    numel = getattr(array, "numel", None)  # torch: numel(); numpy: .size
    return numel() if callable(numel) else array.size


def _numpy(array) -> np.ndarray:
    if hasattr(array, "detach"):
        array = array.detach().cpu()
    return np.asarray(array, dtype=np.float64)


def _compare_non_finite(a: np.ndarray, b: np.ndarray, tol: float) -> Tuple[float, bool]:
    finite = np.isfinite(a) & np.isfinite(b)
    same = (np.isnan(a) & np.isnan(b)) | (np.isinf(a) & (a == b))
    if not np.all(finite | same):
        return _INF, False
    return compare_outputs(a[finite], b[finite], tol)
