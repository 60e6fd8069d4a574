"""online_dispatch overhead: one small transformer training step inside PtdbgDispatch vs without; prints JSON lines.

usage: python benchmarks/online_dispatch_overhead.py [--repeats R] [--threads T]
The model is benchmarks/dump_overhead.py's GPT at a small size (2 blocks, d=128, seq 64, batch 4). A step
is forward, cross-entropy, backward. Timed, fastest of R runs each (default 3), in one process:
  plain        the fp32 step alone;
  checked      the fp32 step inside PtdbgDispatch(dump_mode="OFF", bench_dtype="float64"): every op is
               re-run on CPU in float64 and judged (the meaningful check of a CPU fp32 model);
  float64      the same step with the model and data in float64: "every op once more in float64";
  checked_bf16 a bf16 step inside PtdbgDispatch with the default float32 bench (ratio to a bf16 plain step);
  noop_mode    the fp32 step inside a TorchDispatchMode that only calls each op: the floor any
               dispatch-mode checker pays before it does any work.
Prints one line per configuration, then a summary with the ratio checked/plain, the share of the checking
time spent widening inputs for the CPU (convert), in the CPU re-run itself (rerun) and in judging, and
the target: checking overhead (checked - plain) no more than 1.2 x the float64 step.
"""
import argparse
import json
import os
import sys
import tempfile
import time

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from dump_overhead import GPT  # noqa: E402
from msprobe.core.log import set_level  # noqa: E402
from msprobe.pytorch.online_dispatch import PtdbgDispatch  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

TARGET_OVERHEAD_VS_FLOAT64 = 1.2
VOCAB, SEQ, BATCH = 500, 64, 4


def _model(dtype):
    torch.manual_seed(0)
    return GPT(vocab=VOCAB, d=128, layers=2, heads=4, ctx=SEQ).to(dtype)


def _step(model, idx, tgt):
    logits = model(idx)
    loss = nn.functional.cross_entropy(logits.view(-1, VOCAB).float(), tgt.view(-1))
    loss.backward()
    model.zero_grad(set_to_none=True)


class _NoopMode(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def _time_noop(model, idx, tgt, repeats):
    best = float("inf")
    _step(model, idx, tgt)
    for _ in range(repeats):
        started = time.perf_counter()
        with _NoopMode():
            _step(model, idx, tgt)
        best = min(best, time.perf_counter() - started)
    return best, None, 0


def _time(model, idx, tgt, repeats, dispatch_kwargs=None, dump_path=None):
    best, seconds, ops = float("inf"), None, 0
    _step(model, idx, tgt)  # warm-up: first-call allocations and kernel selection
    for _ in range(repeats):
        if dispatch_kwargs is None:
            started = time.perf_counter()
            _step(model, idx, tgt)
            elapsed = time.perf_counter() - started
        else:
            dispatch = PtdbgDispatch(dump_path=dump_path, **dispatch_kwargs)
            started = time.perf_counter()
            with dispatch:
                _step(model, idx, tgt)
            elapsed = time.perf_counter() - started
        if elapsed < best:
            best = elapsed
            if dispatch_kwargs is not None:
                seconds, ops = dict(dispatch.seconds), len(dispatch.results[0])
    return best, seconds, ops


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    set_level(2)  # the per-context INFO line is not part of the measure
    idx, tgt = torch.randint(0, VOCAB, (BATCH, SEQ)), torch.randint(0, VOCAB, (BATCH, SEQ))
    results = {}
    with tempfile.TemporaryDirectory() as dump_path:
        fp32, bf16, fp64 = _model(torch.float32), _model(torch.bfloat16), _model(torch.float64)
        results["plain"] = _time(fp32, idx, tgt, args.repeats)
        results["checked"] = _time(fp32, idx, tgt, args.repeats, {"bench_dtype": "float64"}, dump_path)
        results["float64"] = _time(fp64, idx, tgt, args.repeats)
        results["plain_bf16"] = _time(bf16, idx, tgt, args.repeats)
        results["checked_bf16"] = _time(bf16, idx, tgt, args.repeats, {}, dump_path)
        results["noop_mode"] = _time_noop(fp32, idx, tgt, args.repeats)
    for name, (seconds, split, ops) in results.items():
        line = {"config": name, "step_s": round(seconds, 4)}
        if split:
            line.update(ops_checked=ops, **{f"{key}_s": round(value, 4) for key, value in split.items()})
        print(json.dumps(line))
    plain, checked, fp64 = results["plain"][0], results["checked"][0], results["float64"][0]
    split = results["checked"][1]
    overhead = checked - plain
    print(json.dumps({
        "summary": "online_dispatch", "ratio_checked_vs_plain": round(checked / plain, 2),
        "ratio_checked_bf16_vs_plain_bf16": round(results["checked_bf16"][0] / results["plain_bf16"][0], 2),
        **{f"{key}_share_of_overhead": round(value / overhead, 3) for key, value in split.items()},
        "overhead_vs_float64_step": round(overhead / fp64, 2),
        "noop_mode_overhead_vs_float64_step": round((results["noop_mode"][0] - plain) / fp64, 2),
        "target": f"<= {TARGET_OVERHEAD_VS_FLOAT64}",
        "met": overhead <= TARGET_OVERHEAD_VS_FLOAT64 * fp64}))


if __name__ == "__main__":
    main()
