"""Fingerprint dump (summary_mode "xor") against PyTorch's DebugMode with log_tensor_hashes, in one process.

usage: python benchmarks/fingerprint_vs_debugmode.py [gpt|llama|both]   (env STEPS, default 4; REPEATS, default 3;
       DIVERGENCE_ONLY=1 skips the timings; CLOCK=cpu times steps in process CPU time instead of wall time,
       which moves less while other processes load the machine)

Two models: the benchmark GPT of shared/bench/dump_overhead.py (same definition, CPU, 2 threads) and a 4-layer
`transformers` Llama (hidden 64). For each, one training step is timed without any tool, with DebugMode +
log_tensor_hashes("hash_tensor"), and with msprobe's statistics task, summary_mode "xor", at L2 and at L1 —
alternating, REPEATS rounds, the lowest median of each (the round least disturbed by other processes), and
the median over rounds of each round's own ratios (steadier when the load changes between rounds). THREADS
(default 2) sets torch's thread count.
Prints one JSON line per model: each tool's ratio to the plain step, and the targets (L2 xor <= half of
DebugMode's overhead; L1 xor <= 1.2x on the GPT).

Then both tools look for the first divergence between a good step and one whose first layer norm (GPT:
the torch.layer_norm that F.layer_norm calls) or SiLU (Llama: torch._C._nn.silu) returns a result one ulp
away. DebugMode's check_hash_mismatches (first mismatching op) and msprobe's first divergence (L2 xor dumps)
must name the same op. Both hash an op's output as it leaves its dispatch, before the patched Python binding
changes it, so both first see the difference at the op that reads the changed tensor.
"""
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

import torch
import torch.nn as nn

from msprobe.core.compare.first_divergence import find_first_divergence
from msprobe.pytorch import PrecisionDebugger

THREADS = int(os.environ.get("THREADS", "2"))  # THREADS=1: no OpenMP spin-waits in CPU time on a loaded machine
torch.set_num_threads(THREADS)
STEPS = int(os.environ.get("STEPS", "4"))
REPEATS = int(os.environ.get("REPEATS", "3"))
CLOCK = time.process_time if os.environ.get("CLOCK") == "cpu" else time.perf_counter


from dump_overhead import GPT  # noqa: E402  (the benchmark GPT, defined once in benchmarks/)


def build(name):
    """(model, loss function, the (module, name) of the function to perturb) of a benchmark model."""
    torch.manual_seed(0)
    if name == "gpt":
        model, vocab = GPT(), 1000
        ids = torch.randint(0, vocab, (8, 128), generator=torch.Generator().manual_seed(1))
        loss = lambda m: nn.functional.cross_entropy(m(ids).reshape(-1, vocab), ids.reshape(-1))  # noqa: E731
        return model, loss, (torch, "layer_norm")  # F.layer_norm looks torch.layer_norm up at each call
    from transformers import LlamaConfig, LlamaForCausalLM
    config = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    model = LlamaForCausalLM(config)
    ids = torch.randint(0, 256, (4, 64), generator=torch.Generator().manual_seed(1))
    return model, (lambda m: m(input_ids=ids, labels=ids).loss), (torch._C._nn, "silu")  # F.silu: the same


def step(model, loss):
    model.zero_grad(set_to_none=True)
    loss(model).backward()


def time_plain(model, loss):
    times = []
    for _ in range(STEPS):
        start = CLOCK()
        step(model, loss)
        times.append(CLOCK() - start)
    return statistics.median(times[1:])


def time_debugmode(model, loss):
    from torch.utils._debug_mode import DebugMode
    times = []
    for _ in range(STEPS):
        start = CLOCK()
        with DebugMode() as mode, DebugMode.log_tensor_hashes("hash_tensor"):
            step(model, loss)
        times.append(CLOCK() - start)
        del mode
    return statistics.median(times[1:])


def _debugger(work, level):
    os.makedirs(work, exist_ok=True)
    config = os.path.join(work, f"config_{level}.json")
    with open(config, "w") as handle:
        json.dump({"task": "statistics", "level": level, "dump_path": os.path.join(work, f"dump_{level}"),
                   "statistics": {"summary_mode": "xor"}}, handle)
    return PrecisionDebugger(config_path=config)


def time_xor(model, loss, work, level):
    debugger = _debugger(work, level)
    times = []
    for _ in range(STEPS):
        start = CLOCK()
        debugger.start(model)
        step(model, loss)
        debugger.stop()
        debugger.step()
        times.append(CLOCK() - start)
    debugger.close()
    shutil.rmtree(os.path.join(work, f"dump_{level}"), ignore_errors=True)
    return statistics.median(times[1:])


def overheads(name, work):
    model, loss, _ = build(name)
    step(model, loss)  # warm-up
    runs = {"none": [], "debugmode": [], "xor_L2": [], "xor_L1": []}
    for _ in range(REPEATS):  # alternate: each tool sees the same machine load as the plain step
        runs["none"].append(time_plain(model, loss))
        runs["debugmode"].append(time_debugmode(model, loss))
        runs["xor_L2"].append(time_xor(model, loss, work, "L2"))
        runs["xor_L1"].append(time_xor(model, loss, work, "L1"))
    best = {key: min(values) for key, values in runs.items()}
    ratio = {key: round(best[key] / best["none"], 2) for key in best if key != "none"}
    targets = {"xor_L2_overhead_vs_half_debugmode": round((ratio["xor_L2"] - 1) / (ratio["debugmode"] - 1), 2)}
    # the same within each round (the tools timed right after their plain step), then the median over rounds:
    # steadier than the best-of-each when the load changes from round to round
    per_round = [{key: runs[key][i] / runs["none"][i] for key in runs if key != "none"} for i in range(REPEATS)]
    round_ratio = {key: round(statistics.median(r[key] for r in per_round), 2) for key in per_round[0]}
    targets["per_round_median_L2_overhead_vs_debugmode"] = round(statistics.median(
        (r["xor_L2"] - 1) / (r["debugmode"] - 1) for r in per_round), 2)
    if name == "gpt":
        targets["xor_L1_ratio_target_1.2"] = ratio["xor_L1"]
        targets["per_round_median_L1_ratio"] = round_ratio["xor_L1"]
    return {"model": name, "threads": THREADS, "clock": os.environ.get("CLOCK", "wall"),
            "step_s": round(best["none"], 4), "ratio": ratio, "per_round_median_ratio": round_ratio,
            "targets": targets, "all_s": {key: [round(v, 4) for v in values] for key, values in runs.items()}}


def perturbed(kernel):
    """Patch the function (module, name) that a torch.nn.functional API calls: its first call's result is
    one ulp away (float32 bits + 1, changed in place with dispatch modes off, so neither tool sees an extra
    op and autograd is untouched). Returns the undo."""
    owner, attr = kernel
    original, calls = getattr(owner, attr), []

    def changed(x, *args, **kwargs):
        calls.append(1)
        out = original(x, *args, **kwargs)
        if len(calls) == 1:
            with torch.no_grad(), torch._C._DisableTorchDispatch():
                out.detach().view(torch.int32).add_(1)
        return out
    setattr(owner, attr, changed)
    return lambda: setattr(owner, attr, original)


def first_divergence_both(name, work):
    """Both tools on a good step and a step with the injected one-ulp kernel result (each tool's bad run
    patches afresh). The tools hash an op's output as it leaves the op's dispatch, before the patched
    Python binding changes it, so both see the difference first at the op that reads the changed tensor."""
    from torch.utils._debug_mode import DebugMode
    logs, dumps = [], []
    for bad in (False, True):
        model, loss, kernel = build(name)
        undo = perturbed(kernel) if bad else (lambda: None)
        try:
            with DebugMode() as mode, DebugMode.log_tensor_hashes("hash_tensor"):
                step(model, loss)
            logs.append(mode.logs)
        finally:
            undo()
        model, loss, kernel = build(name)
        undo = perturbed(kernel) if bad else (lambda: None)
        try:
            root = os.path.join(work, f"fd_{bad}")
            debugger = _debugger(root, "L2")
            debugger.start(model)
            step(model, loss)
            debugger.stop()
            debugger.step()
            debugger.close()
            dumps.append(os.path.join(root, "dump_L2"))
        finally:
            undo()
    mismatches = DebugMode.check_hash_mismatches(logs[0], logs[1])
    report = find_first_divergence(dumps[1], dumps[0], os.path.join(work, "fd_out"))
    theirs = str(mismatches[0]["call"]) if mismatches else None
    ours = report["call"]
    same = theirs is not None and ours is not None and ours.split(".")[1] == theirs.split("::")[-1].split(".")[0]
    return {"model": name, "debugmode_first_mismatch": theirs, "msprobe_first_divergence": ours,
            "msprobe_class": report["class"], "same_op": same}


def main():
    which = sys.argv[1] if len(sys.argv) > 1 else "both"
    work = tempfile.mkdtemp(prefix="msprobe_fp_bench_")
    try:
        for name in (["gpt", "llama"] if which == "both" else [which]):
            if os.environ.get("DIVERGENCE_ONLY") != "1":
                print(json.dumps(overheads(name, work)), flush=True)
            print(json.dumps(first_divergence_both(name, work)), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
