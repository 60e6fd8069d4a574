"""Re-run one intercepted ATen call on CPU in high precision, judge its outputs and dump its tensors.

Runs in the training process (process_num=0) or in a worker process; both call `check_call`.
"""
import os
import time
from typing import Any, Dict, List, Optional

import numpy as np
import torch
from torch.utils._pytree import tree_leaves

from msprobe.core.paths import DIR_MODE, FILE_MODE
from msprobe.pytorch.online_dispatch.widen_cache import WidenCache
from msprobe.pytorch.online_dispatch.op_call import OpCall, resolve_op, tensor_to_numpy
from msprobe.pytorch.online_dispatch.single_benchmark import (BFLOAT16, FAIL, FLOAT16, PASS, THRESHOLDS, judge_buffers,
                                                               judge_output)

__all__ = ["BENCH_DTYPES", "check_call", "tensor_leaves", "to_bench", "dtype_name", "SKIPPED"]

BENCH_DTYPES = {"float32": torch.float32, "float64": torch.float64}
SKIPPED = "skipped"
_PRECISION = {torch.float16: 1, torch.bfloat16: 1, torch.float32: 2, torch.float64: 3}


_DTYPE_NAMES: Dict[torch.dtype, str] = {}


def dtype_name(dtype: torch.dtype) -> str:
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = str(dtype).rsplit(".", 1)[-1]
    return name


def _widen(dtype: torch.dtype, bench_dtype: torch.dtype) -> torch.dtype:
    """Floating dtypes below the bench precision become the bench dtype; others stay."""
    if dtype in _PRECISION and _PRECISION[dtype] < _PRECISION[bench_dtype]:
        return bench_dtype
    return dtype


def to_bench(value: Any, bench_dtype: torch.dtype, cache: Optional[WidenCache] = None) -> Any:
    """One argument for the CPU re-run: tensors on CPU and widened, devices CPU, float dtypes widened;
    lists, tuples and dicts element by element. `cache` reuses copies made for earlier ops."""
    if isinstance(value, torch.Tensor):
        tensor = value.detach()
        dtype = _widen(tensor.dtype, bench_dtype)
        if cache is not None:
            return cache.widen(tensor, dtype)
        return tensor.to(device="cpu", dtype=dtype)
    if isinstance(value, (list, tuple)):
        converted = [to_bench(item, bench_dtype, cache) for item in value]
        if type(value) in (list, tuple):
            return type(value)(converted)
        return type(value)(*converted) if hasattr(value, "_fields") else type(value)(converted)  # namedtuple, Size
    if isinstance(value, dict):
        return {key: to_bench(item, bench_dtype, cache) for key, item in value.items()}
    if isinstance(value, torch.device):
        return torch.device("cpu")
    if isinstance(value, torch.dtype):
        return _widen(value, bench_dtype)
    return value


def tensor_leaves(value) -> List[torch.Tensor]:
    """The tensors of an op's arguments or outputs (the flat shapes without pytree's generality)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)) and all(isinstance(item, torch.Tensor) for item in value):
        return list(value)
    return [leaf for leaf in tree_leaves(value) if isinstance(leaf, torch.Tensor)]


def _save_npy(directory: str, file_name: str, tensor: torch.Tensor) -> None:
    os.makedirs(directory, mode=DIR_MODE, exist_ok=True)
    path = os.path.join(directory, file_name)
    # O_EXCL: a dump never writes through an existing name (or a link planted there)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    with os.fdopen(descriptor, "wb") as handle:
        np.save(handle, tensor_to_numpy(tensor), allow_pickle=False)


def _dump(call: OpCall, bench_outputs: List[Optional[torch.Tensor]], dump_dir: str) -> None:
    device_dir, cpu_dir = os.path.join(dump_dir, "npu"), os.path.join(dump_dir, "cpu")
    for i, tensor in enumerate(tensor_leaves((call.args, call.kwargs))):
        _save_npy(device_dir, f"{call.label}_input.{i}.npy", tensor)
    for i, tensor in enumerate(call.outputs):
        if tensor is not None:
            _save_npy(device_dir, f"{call.label}_output.{i}.npy", tensor)
    for i, tensor in enumerate(bench_outputs):
        if tensor is not None:
            _save_npy(cpu_dir, f"{call.label}_output.{i}.npy", tensor)


def _summary(call: OpCall, status: str, message: str, dtypes: str, outputs: int) -> Dict[str, Any]:
    verdict = {PASS: "Yes", FAIL: "No"}.get(status, "Skipped")
    return {"sequence": call.sequence, "Op Name": call.label, "Direction": call.direction, "Device Dtype": dtypes,
            "Outputs Checked": outputs, "Accuracy Reached or Not": verdict, "Message": message}


_KINDS = {torch.float32: 4, torch.float64: 8, torch.float16: FLOAT16, torch.bfloat16: BFLOAT16}


def _judge(dut: torch.Tensor, bench: torch.Tensor) -> Dict[str, Any]:
    """judge_output's row; float outputs of matching shape are read in place by the one-pass kernel."""
    name = dtype_name(dut.dtype)
    if (name in THRESHOLDS and dut.shape == bench.shape and dut.numel() and dut.dtype in _KINDS
            and bench.dtype in (torch.float32, torch.float64)):
        dut_cpu = dut.detach()
        if dut_cpu.device.type != "cpu":
            dut_cpu = dut_cpu.cpu()
        dut_cpu, bench_cpu = dut_cpu.contiguous(), bench.detach().contiguous()
        row = judge_buffers(dut_cpu.data_ptr(), _KINDS[dut.dtype], bench_cpu.data_ptr(), _KINDS[bench.dtype],
                            dut_cpu.numel(), name)
        if row is not None:
            return row
    return judge_output(tensor_to_numpy(dut), tensor_to_numpy(bench), name)


def _detail(call, position, dut, bench, bench_dtype_name) -> Dict[str, Any]:
    judged = _judge(dut, bench)
    return {"sequence": call.sequence, "Op Name": call.label, "Direction": call.direction, "Output Index": position,
            "Device Dtype": dtype_name(dut.dtype), "Bench Dtype": dtype_name(bench.dtype) if bench.dtype.is_floating_point
            else bench_dtype_name, "Shape": str(list(dut.shape)), "Cosine": judged["cosine"],
            "MaxAbsErr": judged["max_abs_all"], "Small Value Max Abs Err": judged["max_abs_err"],
            "Max Abs Idx": judged["max_abs_idx"], "Max Rel Err": judged["max_rel_err"],
            "Max Rel Idx": judged["max_rel_idx"], "Error Balance": judged["error_balance"],
            "Error Threshold": judged["error_thd"], "EB Threshold": judged["eb_thd"],
            "Status": judged["status"], "Message": judged["message"]}


def check_call(call: OpCall, bench_dtype: str = "float32", dump_dir: Optional[str] = None,
               dump_failed: bool = False, cache: Optional[WidenCache] = None) -> Dict[str, Any]:
    """{'summary': row, 'details': [rows], 'failed': bool, 'seconds': {'convert', 'rerun', 'judge'}}; tensors are
    dumped under `dump_dir` when the call asks for it (`call.dump`) or when it failed and `dump_failed` is set."""
    target = BENCH_DTYPES[bench_dtype]
    started = time.perf_counter()
    dtypes = ",".join(sorted({dtype_name(t.dtype) for t in call.outputs if t is not None}))
    try:
        func = resolve_op(call.op)
        bench_args = to_bench(call.args, target, cache)
        bench_kwargs = to_bench(call.kwargs, target, cache)
        converted = time.perf_counter()
        bench_out = func(*bench_args, **bench_kwargs)
    except Exception as exc:  # no CPU kernel, or a kernel that refuses widened inputs
        message = f"not re-run on CPU: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        return {"summary": _summary(call, SKIPPED, message[:300], dtypes, 0), "details": [], "failed": False}
    bench_outputs = tensor_leaves(bench_out)
    rerun_seconds = time.perf_counter() - converted
    convert_seconds = converted - started
    if len(bench_outputs) != len(call.outputs):
        message = f"the CPU re-run returned {len(bench_outputs)} tensors, the device {len(call.outputs)}"
        return {"summary": _summary(call, SKIPPED, message, dtypes, 0), "details": [], "failed": False}
    details = [_detail(call, i, dut, bench, bench_dtype) for i, (dut, bench) in enumerate(zip(call.outputs, bench_outputs))
               if dut is not None]
    failed = any(row["Status"] == FAIL for row in details)
    message = "; ".join(f"output {row['Output Index']}: {row['Message']}" for row in details if row["Status"] == FAIL)
    if dump_dir and (call.dump or (failed and dump_failed)):
        _dump(call, bench_outputs, dump_dir)
    return {"summary": _summary(call, FAIL if failed else PASS, message, dtypes, len(details)),
            "details": details, "failed": failed,
            "seconds": {"convert": convert_seconds, "rerun": rerun_seconds,
                        "judge": time.perf_counter() - converted - rerun_seconds}}
