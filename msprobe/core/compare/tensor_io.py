"""Read dumped tensor files (.pt, .npy) as numpy arrays and compute tensor-mode metrics for row pairs.

Work is spread over processes (one tensor pair at a time, each file read once) because loading and
reducing hundreds of MB of tensors is the whole cost of tensor mode.
"""
import os

import numpy as np

from msprobe.core.compare.metrics import NONE, TensorMetrics, tensor_metrics
from msprobe.core.compare.pt_reader import UnreadableTensorFile, read_pt
from msprobe.core.log import logger

__all__ = ["load_tensor", "compare_tensor_files", "MSG_NO_BENCH", "msg_not_found"]

MSG_NO_BENCH = "No bench data matched."
_LOADERS = {}


def msg_not_found(path):
    return f"Dump file: {path} not found."


def register_loader(suffix, loader):
    """Let a framework adapter read its own tensor file type: loader(path) -> numpy array."""
    _LOADERS[suffix] = loader


def _load_pt(path):
    import torch

    try:  # mmap: the numpy view reads the page cache directly instead of copying every tensor
        tensor = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except RuntimeError:  # legacy (non-zip) .pt files cannot be mapped
        tensor = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(tensor, torch.Tensor):
        raise ValueError(f"{path} does not hold a tensor")
    tensor = tensor.detach()
    if tensor.dtype in (torch.bfloat16, torch.float16):
        tensor = tensor.float()
    elif tensor.is_complex():
        tensor = torch.view_as_real(tensor)
    return tensor.numpy()


def load_tensor(path):
    """The tensor stored at `path` as a numpy array (bf16/fp16 widened to float32)."""
    suffix = os.path.splitext(path)[1]
    if suffix in _LOADERS:
        return _LOADERS[suffix](path)
    if suffix == ".pt":
        try:  # plain tensors need no torch import (seconds per worker) and are memory-mapped
            array = read_pt(path)
            return array.astype(np.float32) if array.dtype == np.float16 else array
        except UnreadableTensorFile:
            return _load_pt(path)
    array = np.load(path, allow_pickle=False)
    return array.astype(np.float32) if array.dtype == np.float16 else array


def _mismatch_message(path, array, recorded):
    if recorded is None or tuple(array.shape) == tuple(recorded):
        return None
    return (f"Dump file: {os.path.basename(path)} holds shape {list(array.shape)} but dump.json records "
            f"{list(recorded)}; the dump is inconsistent.")


def _pair_metrics(task):
    npu_path, bench_path = task[:2]
    npu_shape, bench_shape = task[2:] if len(task) == 4 else (None, None)
    if not npu_path or not os.path.isfile(npu_path):
        return TensorMetrics(NONE, NONE, NONE, NONE, NONE, msg_not_found(npu_path))
    if not bench_path or not os.path.isfile(bench_path):
        return TensorMetrics(NONE, NONE, NONE, NONE, NONE, MSG_NO_BENCH)
    try:
        npu = load_tensor(npu_path)
    except Exception as exc:  # a broken file is a row, not a crash
        logger.debug("cannot read %s: %s", npu_path, exc)
        return TensorMetrics(NONE, NONE, NONE, NONE, NONE, msg_not_found(npu_path))
    try:
        bench = load_tensor(bench_path)
    except Exception as exc:
        logger.debug("cannot read %s: %s", bench_path, exc)
        return TensorMetrics(NONE, NONE, NONE, NONE, NONE, MSG_NO_BENCH)
    message = _mismatch_message(npu_path, npu, npu_shape) or _mismatch_message(bench_path, bench, bench_shape)
    if message:
        return TensorMetrics(NONE, NONE, NONE, NONE, NONE, message)
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
