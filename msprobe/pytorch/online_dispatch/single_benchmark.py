"""Judge one op output against its high-precision re-run with the single-benchmark standard.

No torch: the same functions judge in the training process and in worker processes. `judge_output` takes
numpy arrays; `judge_buffers` takes two dense buffers by address and reads them once in C
(msprobe._native._pair, msprobe/_native/_pair.c, 10-15x faster than the numpy passes); it falls back to numpy for NaN/Inf,
and is None when the extension was not built or MSPROBE_NATIVE_STATS=0.
Thresholds belong to the dtype the op ran in on the device under test (DUT), never to the bench dtype:
an fp16 output is judged as fp16 even though it is compared with an fp32 re-run.

Rule (the single-benchmark standard of msprobe 1.2.1's online_dispatch, with the DUT dtype's thresholds):
- where |bench| < 1 the error is absolute, elsewhere relative (|dut - bench| / |bench|);
- error balance = |mean of the signed errors| measures a one-sided bias;
- pass when max abs error <= error_thd, max rel error <= error_thd and error balance <= eb_thd;
- NaN/Inf must sit at the same positions with the same values; integer and bool outputs must be equal.
Cosine and the overall max abs error (the documented 1.2.1 pass rule) are reported as extra columns.
"""
from typing import Dict

import numpy as np

from msprobe._native import load

__all__ = ["THRESHOLDS", "SMALL_VALUE", "PASS", "FAIL", "judge_output", "judge_buffers", "FLOAT16", "BFLOAT16"]

PASS, FAIL = "pass", "fail"
SMALL_VALUE = 1.0
# DUT dtype -> (error threshold, error-balance threshold); an fp16 result correctly rounded has a
# relative error of at most 2^-11, a bf16 one 2^-8, so a healthy kernel passes
THRESHOLDS = {"float16": (2.0 ** -11, 2.0 ** -10), "bfloat16": (2.0 ** -8, 2.0 ** -7),
              "float32": (2.0 ** -14, 2.0 ** -14), "float64": (2.0 ** -14, 2.0 ** -14)}

# the buffer kinds of the C kernel: 4 float32, 8 float64, and these for the 16-bit floats
FLOAT16, BFLOAT16 = 2, 258
_KERNELS = load("_pair")  # None without a compiler or with MSPROBE_NATIVE_STATS=0: judge_output (numpy) serves
_judge_pair = None if _KERNELS is None else _KERNELS.judge_pair


def _empty_row(dut_dtype: str) -> Dict[str, object]:
    error_thd, eb_thd = THRESHOLDS.get(dut_dtype, ("", ""))
    return {"cosine": "", "max_abs_all": "", "max_abs_err": "", "max_abs_idx": "", "max_rel_err": "",
            "max_rel_idx": "", "error_balance": "", "error_thd": error_thd, "eb_thd": eb_thd}


def _special_values_differ(dut: np.ndarray, bench: np.ndarray) -> bool:
    bad_dut, bad_bench = ~np.isfinite(dut), ~np.isfinite(bench)
    if not (bad_dut.any() or bad_bench.any()):
        return False
    if not np.array_equal(bad_dut, bad_bench):
        return True
    return not np.array_equal(dut[bad_dut], bench[bad_bench], equal_nan=True)


def _exact_row(dut, bench, dut_dtype):
    row = _empty_row(dut_dtype)
    differ = int(np.count_nonzero(dut != bench))
    row["status"] = PASS if differ == 0 else FAIL
    row["message"] = "" if differ == 0 else f"{differ} of {dut.size} values differ"
    return row


def _cosine_of_dots(dot_db: float, dot_dd: float, dot_bb: float) -> float:
    """Cosine from the three dot products; two zero vectors are alike (1), one zero vector is not (0)."""
    norms = (dot_dd ** 0.5) * (dot_bb ** 0.5)
    if norms == 0:
        return 1.0 if dot_dd == 0 and dot_bb == 0 else 0.0
    return float(min(max(dot_db / norms, -1.0), 1.0))


def _cosine(dut: np.ndarray, bench: np.ndarray) -> float:
    """Cosine of two finite float64 vectors (einsum, so the value does not depend on BLAS threads)."""
    return _cosine_of_dots(float(np.einsum("i,i->", dut, bench)), float(np.einsum("i,i->", dut, dut)),
                           float(np.einsum("i,i->", bench, bench)))


def judge_output(dut, bench, dut_dtype: str) -> Dict[str, object]:
    """Metrics and verdict of one output: `dut` and `bench` are numpy arrays (bench in high precision),
    `dut_dtype` the short dtype name of the DUT output ('float16', 'bfloat16', 'int64', ...)."""
    dut, bench = np.asarray(dut), np.asarray(bench)
    if dut.shape != bench.shape:
        row = _empty_row(dut_dtype)
        row.update(status=FAIL, message=f"shape {list(dut.shape)} differs from bench shape {list(bench.shape)}")
        return row
    if dut_dtype not in THRESHOLDS:
        return _exact_row(dut, bench, dut_dtype)
    row = _empty_row(dut_dtype)
    if dut.size == 0:
        row.update(status=PASS, message="empty output")
        return row
    dut = np.asarray(dut, dtype=np.float64).reshape(-1)
    bench = np.asarray(bench, dtype=np.float64).reshape(-1)
    with np.errstate(invalid="ignore", over="ignore"):
        signed = dut - bench
    positions = None  # flat positions of the judged elements when some were left out
    if not np.isfinite(signed).all():  # NaN/Inf somewhere: they must agree, then judge the rest
        if _special_values_differ(dut, bench):
            row.update(status=FAIL, message="NaN/Inf differ from the bench")
            return row
        finite = np.isfinite(dut)
        positions = np.flatnonzero(finite)
        dut, bench, signed = dut[finite], bench[finite], signed[finite]
        if dut.size == 0:
            row.update(status=PASS, message="no finite values; NaN/Inf match")
            return row
    magnitude = np.abs(bench)
    small = magnitude < SMALL_VALUE
    np.maximum(magnitude, SMALL_VALUE, out=magnitude)
    np.divide(signed, magnitude, out=signed)  # absolute error on small values, relative elsewhere
    error_balance = abs(float(signed.mean()))
    error = np.abs(signed, out=signed)
    abs_part = np.where(small, error, 0.0)
    abs_idx = int(abs_part.argmax())
    np.putmask(error, small, 0.0)
    rel_idx = int(error.argmax())
    max_abs, max_rel = float(abs_part[abs_idx]), float(error[rel_idx])
    if positions is not None:
        abs_idx, rel_idx = int(positions[abs_idx]), int(positions[rel_idx])
    row.update(cosine=_cosine(dut, bench), max_abs_all=float(np.max(np.abs(dut - bench))),
               max_abs_err=max_abs, max_abs_idx=abs_idx if max_abs > 0 else "",
               max_rel_err=max_rel, max_rel_idx=rel_idx if max_rel > 0 else "", error_balance=error_balance)
    return _verdict(row, dut_dtype)


def _verdict(row: Dict[str, object], dut_dtype: str) -> Dict[str, object]:
    """Status and message of a row holding the metrics, with the DUT dtype's thresholds."""
    error_thd, eb_thd = THRESHOLDS[dut_dtype]
    problems = []
    if row["max_abs_err"] > error_thd:
        problems.append(f"max abs error {row['max_abs_err']:.6g} > {error_thd:.6g}")
    if row["max_rel_err"] > error_thd:
        problems.append(f"max rel error {row['max_rel_err']:.6g} > {error_thd:.6g}")
    if row["error_balance"] > eb_thd:
        problems.append(f"error balance {row['error_balance']:.6g} > {eb_thd:.6g}")
    row["status"] = FAIL if problems else PASS
    row["message"] = "; ".join(problems)
    return row


def judge_buffers(dut_address: int, dut_kind: int, bench_address: int, bench_kind: int, count: int,
                  dut_dtype: str):
    """The row of `judge_output` for two dense buffers of `count` >= 1 elements (kinds: 4 float32, 8 float64,
    FLOAT16, BFLOAT16; the bench float32 or float64) read in one pass; None when the C kernel is missing or
    when either buffer holds NaN/Inf (the caller then uses `judge_output`, which checks their positions)."""
    if _judge_pair is None:
        return None
    metrics = _judge_pair(dut_address, dut_kind, bench_address, bench_kind, count)
    if metrics is None:
        return None
    max_all, max_abs, abs_idx, max_rel, rel_idx, mean_signed, dot_db, dot_dd, dot_bb = metrics
    row = _empty_row(dut_dtype)
    row.update(cosine=_cosine_of_dots(dot_db, dot_dd, dot_bb), max_abs_all=max_all, max_abs_err=max_abs,
               max_abs_idx=abs_idx if abs_idx >= 0 else "",
               max_rel_err=max_rel, max_rel_idx=rel_idx if rel_idx >= 0 else "", error_balance=abs(mean_signed))
    return _verdict(row, dut_dtype)
