"""Shared driver of the dump-overhead benchmarks: alternate runs without and with the debugger.

`run_configs(train, configs, steps, repeats, targets, **extra)` calls `train()` once to warm up, then
for each config `repeats` times `train()` (baseline) and `train(config, dump_path)`; `train` returns
(median step seconds, losses). One JSON line per config: the lowest median of each side (the run least
disturbed by other processes), their ratio, the target and whether the losses were identical; the same
records are returned as a list of dicts.
"""
import json
import os
import shutil
import tempfile

__all__ = ["run_configs"]


def run_configs(train, configs, steps, repeats, targets, **extra):
    work = tempfile.mkdtemp(prefix="msprobe_bench_")
    results = []
    try:
        train()  # warm-up: first-call costs of kernels are not overhead
        for config in configs:
            bases, tools, identical = [], [], True
            for repeat in range(repeats):
                base, base_losses = train()
                dump_path = os.path.join(work, f"{config.replace(':', '_')}_{repeat}")
                tool, tool_losses = train(config, dump_path)
                shutil.rmtree(dump_path, ignore_errors=True)
                bases.append(base)
                tools.append(tool)
                identical = identical and base_losses == tool_losses
            result = {**extra, "config": config, "steps": steps, "repeats": repeats,
                      "median_step_s_without": round(min(bases), 4),
                      "median_step_s_with": round(min(tools), 4),
                      "ratio": round(min(tools) / min(bases), 3), "target": targets.get(config),
                      "losses_identical": identical,
                      "all_without": [round(b, 4) for b in bases], "all_with": [round(t, 4) for t in tools]}
            results.append(result)
            print(json.dumps(result), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return results
