"""Tensor-mode metrics for row pairs: each pair's two tensor files read (core/io/tensor_io) and compared.

Work is spread over processes (one tensor pair at a time, each file read once) because loading and
reducing hundreds of MB of tensors is the whole cost of tensor mode.
"""
import os

from msprobe.core.compare.metrics import TensorMetrics, not_compared, tensor_metrics
from msprobe.core.compare.reasons import Reason
from msprobe.core.io.tensor_io import UnreadableTensorFile, first_line, load_tensor
from msprobe.core.log import logger

__all__ = ["compare_tensor_files"]


def _shape_detail(path, array, recorded):
    if recorded is None or tuple(array.shape) == tuple(recorded):
        return None
    return f"{os.path.basename(path)} holds shape {list(array.shape)} but dump.json records {list(recorded)}"


def _read(path, reason):
    """(array, None) or (None, metrics saying why the file could not be read)."""
    try:
        return load_tensor(path), None
    except UnreadableTensorFile as exc:
        return None, not_compared(reason, f"{path} cannot be read: {exc}")
    except Exception as exc:  # a broken file is a row, not a crash
        logger.debug("cannot read %s: %s", path, exc)
        return None, not_compared(reason, f"{path} cannot be read: {first_line(exc)}")


def _pair_metrics(task) -> TensorMetrics:
    npu_path, bench_path = task[:2]
    npu_shape, bench_shape = task[2:] if len(task) == 4 else (None, None)
    if not npu_path or not os.path.isfile(npu_path):
        return not_compared(Reason.NPU_FILE_MISSING, npu_path or "")
    if not bench_path or not os.path.isfile(bench_path):
        return not_compared(Reason.BENCH_FILE_MISSING, bench_path or "")
    npu, failed = _read(npu_path, Reason.NPU_UNREADABLE)
    if failed:
        return failed
    bench, failed = _read(bench_path, Reason.BENCH_UNREADABLE)
    if failed:
        return failed
    detail = _shape_detail(npu_path, npu, npu_shape) or _shape_detail(bench_path, bench, bench_shape)
    if detail:
        return not_compared(Reason.FILE_SHAPE, detail)
    if npu.dtype.kind not in "biufc" or bench.dtype.kind not in "biufc":
        side, path = ("NPU", npu_path) if npu.dtype.kind not in "biufc" else ("bench", bench_path)
        return not_compared(Reason.NPU_UNREADABLE if side == "NPU" else Reason.BENCH_UNREADABLE,
                            f"{path} cannot be read: it holds {npu.dtype if side == 'NPU' else bench.dtype} data, not numbers")
    return tensor_metrics(npu, bench)


def _init_worker():
    import sys

    if "torch" in sys.modules:  # only when the parent already has it; plain .pt files do not need it
        sys.modules["torch"].set_num_threads(1)


def compare_tensor_files(pairs, processes=None, progress=True):
    """Metrics for each (npu_file, bench_file[, npu_shape, bench_shape]) pair, in order; a file whose
    shape differs from the recorded one is reported instead of compared. processes=None: all cores."""
    from tqdm import tqdm

    processes = processes or os.cpu_count() or 1
    total_bytes = sum(os.path.getsize(p[0]) for p in pairs if p[0] and os.path.isfile(p[0]))
    show = progress and len(pairs) > 50
    if processes <= 1 or len(pairs) < 8 or total_bytes < 32 * 2 ** 20:
        return [_pair_metrics(task) for task in tqdm(pairs, desc="compare tensors", disable=not show)]
    import multiprocessing

    context = multiprocessing.get_context("fork")
    chunk = max(1, len(pairs) // (processes * 16))
    with context.Pool(processes, initializer=_init_worker) as pool:
        iterator = pool.imap(_pair_metrics, pairs, chunksize=chunk)
        return list(tqdm(iterator, total=len(pairs), desc="compare tensors", disable=not show))
