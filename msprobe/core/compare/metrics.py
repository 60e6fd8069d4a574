"""Numerics of compare: the table of tensor-mode metrics, their computation, and vectorised statistics diffs.

`TENSOR_METRIC_TABLE` is the one list of tensor-mode metrics: each entry names its field (records.metrics
key, TensorMetrics attribute), its report column, whether a 0-d tensor has it, and how it is computed from
the pair's error arrays (`PairErrors`, computed once per pair). Report columns, markers, the 0-d message,
merge_result's metric list and the graph viewer's keys all derive from it, so adding a metric is one entry.

Text markers used in metric cells (as in the reference reports):
  'unsupported'      metric undefined for this data (0-d tensor cosine, non-tensor values)
  'N/A'              NaN/Inf at different positions on the two sides, or nothing to compare with
  'None'             data missing or empty
  'shape unmatched'  shapes differ
"""
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np

from msprobe.core.compare.reasons import Reason
from msprobe.core.compare.tolerance import same_fill

__all__ = ["TensorMetric", "TENSOR_METRIC_TABLE", "REFERENCE_METRICS", "EXTENSION_METRICS", "PairErrors",
           "TensorMetrics", "tensor_metrics", "statistics_diffs", "UNSUPPORTED", "NA", "NONE",
           "SHAPE_UNMATCHED", "not_compared", "MSG_ZERO_DIM", "MSG_EMPTY", "MSG_SHAPE", "MSG_NAN_POSITION",
           "MSG_DTYPE"]

UNSUPPORTED, NA, NONE, SHAPE_UNMATCHED = "unsupported", "N/A", "None", "shape unmatched"
MSG_EMPTY = "This is empty data, can not compare."
MSG_SHAPE = "Shape of NPU and bench Tensor do not match. Skipped."
MSG_NAN_POSITION = "The Position of inf or nan in NPU and bench Tensor do not match."
MSG_DTYPE = "Dtype of NPU and bench Tensor do not match."
_DECIMALS = 12
_NAN_VALUE = float("nan")
_FLOAT64_EPS = float(np.finfo(np.float64).eps)


def _work_dtype(npu, bench):
    """float32 for low-precision and float32 data (like the reference), float64 when either side needs it."""
    if npu.dtype == np.float64 or bench.dtype == np.float64 or npu.dtype.kind in "iub" and npu.itemsize > 2:
        return np.float64
    return np.float32


def _nonfinite_mismatch(npu, bench):
    """(mismatch?, finite mask or None): NaN/Inf must sit at the same places with the same values."""
    bad_npu, bad_bench = ~np.isfinite(npu), ~np.isfinite(bench)
    if not bad_npu.any() and not bad_bench.any():
        return False, None
    if not np.array_equal(bad_npu, bad_bench):
        return True, None
    same = np.array_equal(npu[bad_npu], bench[bad_bench], equal_nan=True)
    return (not same), ~bad_npu


_DOT_CHUNK = 1 << 16


def _dot(left, right):
    """Dot product accumulated in float64: exact-ish for small arrays, chunked BLAS for big float32 ones."""
    if left.size <= _DOT_CHUNK or left.dtype != np.float32:
        return float(np.einsum("i,i->", left, right, dtype=np.float64))
    return sum(float(np.dot(left[start:start + _DOT_CHUNK], right[start:start + _DOT_CHUNK]))
               for start in range(0, left.size, _DOT_CHUNK))


class PairErrors:
    """What the tensor metrics read, computed once per pair of flat arrays in the working dtype, with two
    temporary buffers: `abs_err` = |n - b|, `relative` = |n - b| / |b|, their maxima, ||n - b||; ||b|| on demand.

    Where b is exactly 0 both values are first shifted by float64's epsilon, as the documented formula
    (and 1.2.1) does, so n = 0.5 against b = 0 counts as 0.5 / 2.2e-16.
    """
    __slots__ = ("npu", "bench", "abs_err", "relative", "max_abs", "max_rel", "error_norm", "_bench_norm")

    def __init__(self, npu: np.ndarray, bench: np.ndarray) -> None:
        self.npu, self.bench = npu, bench
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):  # NaN/Inf inputs: the caller's job
            abs_err = np.subtract(npu, bench)
            np.abs(abs_err, out=abs_err)
            self.error_norm = float(np.sqrt(_dot(abs_err, abs_err)))
            relative = np.abs(bench)
            zeros = relative == 0
            if zeros.any():
                eps = npu.dtype.type(_FLOAT64_EPS)
                relative[zeros] = eps
                abs_err[zeros] = np.abs((npu[zeros] + eps) - eps)
            np.divide(abs_err, relative, out=relative)
        self.abs_err, self.relative = abs_err, relative
        self.max_abs, self.max_rel = float(abs_err.max()), float(relative.max())
        self._bench_norm: Optional[float] = None

    @property
    def bench_norm(self) -> float:
        if self._bench_norm is None:
            self._bench_norm = float(np.sqrt(_dot(self.bench, self.bench)))
        return self._bench_norm

    def share_below(self, limit: float) -> float:
        """Share of elements whose relative error is below `limit`."""
        return np.count_nonzero(self.relative < limit) / self.relative.size


def _cosine(errors: PairErrors) -> float:
    npu, bench = errors.npu, errors.bench
    dot = _dot(npu, bench)
    norm_n, norm_b = float(np.sqrt(_dot(npu, npu))), errors.bench_norm
    if norm_n == 0.0 and norm_b == 0.0:
        return 1.0
    if norm_n == 0.0 or norm_b == 0.0:
        return float("nan")
    return min(max(dot / (norm_n * norm_b), -1.0), 1.0)


@dataclass(frozen=True)
class TensorMetric:
    """One tensor-mode metric of compare.

    field:      key in CompareRecords.metrics and attribute of TensorMetrics
    header:     its report column
    compute:    PairErrors -> float (the pair's finite elements; rounded to 12 decimals afterwards)
    zero_dim:   a 0-d tensor has it (False: NaN, shown as 'unsupported' and named in the 0-d message)
    meaning:    one line for docs and viewers
    reference:  one of 1.2.1's columns (placed where 1.2.1 puts them); False: an added column, placed after
                1.2.1's columns (before Suspicion), so 1.2.1's layout is kept for readers that index columns
    """
    field: str
    header: str
    compute: Callable[[PairErrors], float]
    zero_dim: bool
    meaning: str
    reference: bool = True


TENSOR_METRIC_TABLE: Tuple[TensorMetric, ...] = (
    TensorMetric("cosine", "Cosine", _cosine, False, "cosine similarity of NPU and bench tensors (1: same direction)"),
    TensorMetric("max_abs", "MaxAbsErr", lambda e: e.max_abs, True, "largest |NPU - bench|"),
    TensorMetric("max_rel", "MaxRelativeErr", lambda e: e.max_rel, True, "largest |NPU - bench| / |bench|"),
    TensorMetric("one_thousandth", "One Thousandth Err Ratio", lambda e: e.share_below(0.001), False,
                 "share of elements whose relative error is below 0.001"),
    TensorMetric("five_thousandths", "Five Thousandths Err Ratio", lambda e: e.share_below(0.005), False,
                 "share of elements whose relative error is below 0.005"),
    TensorMetric("euclidean", "EucDist", lambda e: e.error_norm, True,
                 "Euclidean distance ||NPU - bench|| (float64 accumulation) over the compared elements",
                 reference=False),
)
REFERENCE_METRICS = tuple(m for m in TENSOR_METRIC_TABLE if m.reference)
EXTENSION_METRICS = tuple(m for m in TENSOR_METRIC_TABLE if not m.reference)
_COUNT = len(TENSOR_METRIC_TABLE)
_INDEX: Dict[str, int] = {m.field: i for i, m in enumerate(TENSOR_METRIC_TABLE)}


def _zero_dim_message() -> str:
    names = [f"'{m.header}'" for m in REFERENCE_METRICS if not m.zero_dim]
    listed = f"{', '.join(names[:-1])} and {names[-1]}" if len(names) > 1 else "".join(names)
    return f"This is type of 0-d tensor, can not calculate {listed}. "


MSG_ZERO_DIM = _zero_dim_message()


class TensorMetrics(tuple):
    """Tensor-mode metrics of one pair: the table's metrics in table order (NaN: not computed), then the reason
    code saying why, `detail` (an unreadable file), `error_norm` = ||n - b|| and `bench_norm` = ||b|| for the
    dtype-aware judgement. A plain tuple, so it crosses process boundaries; `result.cosine` etc. name the
    table's fields."""
    __slots__ = ()

    def __new__(cls, values, reason: int = Reason.OK, detail: str = "", error_norm: float = _NAN_VALUE,
                bench_norm: float = _NAN_VALUE) -> "TensorMetrics":
        return tuple.__new__(cls, (*values, reason, detail, error_norm, bench_norm))

    def __getnewargs__(self) -> Tuple[Any, ...]:
        return self.values, self.reason, self.detail, self.error_norm, self.bench_norm

    @property
    def values(self) -> Tuple[float, ...]:
        return tuple(self[:_COUNT])

    @property
    def reason(self) -> int:
        return self[_COUNT]

    @property
    def detail(self) -> str:
        return self[_COUNT + 1]

    @property
    def error_norm(self) -> float:
        return self[_COUNT + 2]

    @property
    def bench_norm(self) -> float:
        return self[_COUNT + 3]

    def __getattr__(self, name: str) -> float:
        index = _INDEX.get(name)
        if index is None:
            raise AttributeError(name)
        return self[index]


def not_compared(reason, detail=""):
    """Metrics of a pair that could not be compared."""
    return TensorMetrics((_NAN_VALUE,) * _COUNT, int(reason), detail)


def _round(value):
    return round(float(value), _DECIMALS)


_FILL_FLOOR = 1.0e4  # below every dtype's largest finite magnitude (fp16: 65504)


def _without_same_fills(npu, bench):
    """Both arrays without the elements where both hold a dtype-extreme fill of the same sign (a mask
    written with finfo(dtype).min in each side's dtype): those agree, whatever their dtypes."""
    fills = same_fill(npu, bench)
    if not fills.any() or fills.all():
        return (npu[:1] * 0, bench[:1] * 0) if fills.all() else (npu, bench)
    return npu[~fills], bench[~fills]


def tensor_metrics(npu, bench):
    """Metrics of two numpy arrays, following the documented definitions (10.accuracy_compare_PyTorch).

    Relative error divides by |bench| (an exact zero in bench shifts both sides by float64's epsilon);
    the error ratios count elements whose relative error is below 0.001 / 0.005. Returns numbers and
    a reason code (SHAPE_MISMATCH, EMPTY, NAN_POSITION, ZERO_DIM or OK); `render` makes the cells.
    """
    if npu.shape != bench.shape:
        return not_compared(Reason.SHAPE_MISMATCH)
    if npu.size == 0:
        return not_compared(Reason.EMPTY)
    work = _work_dtype(npu, bench)
    zero_dim = npu.ndim == 0
    npu = np.ascontiguousarray(npu, dtype=work).reshape(-1)
    bench = np.ascontiguousarray(bench, dtype=work).reshape(-1)
    errors = PairErrors(npu, bench)
    if errors.max_abs >= _FILL_FLOOR and np.isfinite(errors.max_abs):  # maybe finfo.min/max fills in two dtypes
        npu, bench = _without_same_fills(npu, bench)
        errors = PairErrors(npu, bench)
    if not (np.isfinite(errors.max_abs) and np.isfinite(errors.max_rel)):  # NaN/Inf somewhere: the careful path
        mismatch, finite = _nonfinite_mismatch(npu, bench)
        if mismatch:
            return not_compared(Reason.NAN_POSITION)
        if finite is not None:
            npu, bench = npu[finite], bench[finite]
        if npu.size == 0:
            return not_compared(Reason.NAN_POSITION)
        errors = PairErrors(npu, bench)
    values = tuple(_round(m.compute(errors)) if m.zero_dim or not zero_dim else _NAN_VALUE
                   for m in TENSOR_METRIC_TABLE)
    return TensorMetrics(values, Reason.ZERO_DIM if zero_dim else Reason.OK, "", errors.error_norm, errors.bench_norm)


def statistics_diffs(npu_stats, bench_stats):
    """Vectorised Max/Min/Mean/Norm diffs (npu - bench) and relative errors |diff| / |bench|.

    Both arguments are float arrays of shape (rows, 4); NaN marks absent values. Relative errors are
    NaN where the bench value is 0 and the diff is not (undefined), 0 where both are 0.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        diff = npu_stats - bench_stats
        relative = np.abs(diff) / np.abs(bench_stats)
    relative[(diff == 0)] = 0.0
    relative[~np.isfinite(relative)] = np.nan
    return diff, relative
