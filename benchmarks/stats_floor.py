"""The memory floor of a statistics dump: bytes its kernel must read a step, against this machine's bandwidth.

usage: [MODEL=llama] [STEPS=6] python benchmarks/stats_floor.py [CONFIG]   (CONFIG as in dump_overhead.py,
default statistics:L1)

A statistics dump reads every distinct tensor content a step makes (inputs before in-place calls, outputs,
parameters, gradients) once. This trains the model of dump_overhead.py (2 threads) under the debugger, counts
the bytes the C statistics kernel reads in place in a step (float_stats: strided views, which it gathers
first, and tensors torch reduces are not counted, so the floor is a lower bound) and the time spent inside
it, times plain steps, and measures the kernel's read bandwidth on a 256 MB buffer that is not in any cache
(one thread and the default pool). Prints one JSON line:

- `kernel_mb_per_step`, `kernel_ms_per_step` (in situ, wall time inside the kernel calls);
- `repeated_mb_per_step`: bytes of memory regions read more than once in a step (in-place updates, and memory
  the allocator handed to a new tensor: different contents, each read legitimately);
- `bandwidth_gb_s` (1 thread, pool), `plain_step_s`;
- `floor_ratio`: 1 + (bytes / best bandwidth) / plain step, the step-time ratio this dump cannot go below
  on this machine even if everything else cost nothing.
"""
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dump_overhead as bench  # noqa: E402

from msprobe.core.dump import native  # noqa: E402
from msprobe.pytorch.dump import adapter as torch_adapter  # noqa: E402

STEPS = int(os.environ.get("STEPS", "6"))


def bandwidth(threads):
    """GB/s of float_stats over a 256 MB float32 buffer (the best of 3), `threads` in the kernel's pool."""
    from msprobe._native import _stats as _fast_stats

    before = _fast_stats.threads(threads)[0]
    try:
        buffer = np.random.default_rng(0).random(64 * 2 ** 20, dtype=np.float32)
        best = min(_timed(lambda: native.float_stats(buffer.ctypes.data, buffer.size, 4, None)) for _ in range(3))
        return buffer.nbytes / best / 1e9
    finally:
        _fast_stats.threads(before)


def _timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def kernel_reads(config):
    """(median MB, median ms, median repeated MB) the kernel reads per dumped step, after one warm-up step."""
    counts = {"bytes": 0, "seconds": 0.0, "regions": {}}
    original = torch_adapter.float_stats
    sizes = {4: 4, 8: 8}

    def counted(address, count, kind, total):
        start = time.perf_counter()
        result = original(address, count, kind, total)
        counts["seconds"] += time.perf_counter() - start
        size = count * sizes.get(kind, 2)
        counts["bytes"] += size
        counts["regions"][(address, size)] = counts["regions"].get((address, size), 0) + 1
        return result

    from msprobe.pytorch import PrecisionDebugger

    torch.manual_seed(0)
    forward, model, batch, vocab = bench.make_model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    debugger = PrecisionDebugger(config_path=bench.write_config(config, tempfile.mkdtemp() + "/dump"), model=model)
    rows = []
    torch_adapter.float_stats = counted
    try:
        for _ in range(STEPS):
            counts.update(bytes=0, seconds=0.0, regions={})
            bench.training_step(forward, opt, debugger, torch.randint(0, vocab, batch), torch.randint(0, vocab, batch),
                                vocab)
            repeated = sum((times - 1) * size for (_, size), times in counts["regions"].items())
            rows.append((counts["bytes"] / 1e6, counts["seconds"] * 1e3, repeated / 1e6))
    finally:
        torch_adapter.float_stats = original
        debugger.close()
    return tuple(statistics.median(row[i] for row in rows[1:]) for i in range(3))


def main(config):
    if native.float_stats is None:
        sys.exit("the C statistics kernel is not built (python setup.py build_ext --inplace)")
    torch.set_num_threads(2)
    plain = min(bench.train()[0] for _ in range(3))  # the least disturbed of three runs
    megabytes, milliseconds, repeated = kernel_reads(config)
    one, pooled = bandwidth(1), bandwidth(2)
    floor = 1 + megabytes / 1e3 / max(one, pooled) / plain
    print(json.dumps({"config": config, "model": bench.MODEL, "plain_step_s": round(plain, 4),
                      "kernel_mb_per_step": round(megabytes, 1), "kernel_ms_per_step": round(milliseconds, 1),
                      "repeated_mb_per_step": round(repeated, 1),
                      "bandwidth_gb_s": {"1_thread": round(one, 1), "pool": round(pooled, 1)},
                      "floor_ratio": round(floor, 3)}))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "statistics:L1")
