"""Overhead of the training monitors on the GPT-style model of benchmarks/dump_overhead.py (CPU, 2 threads).

usage: python benchmarks/monitor_overhead.py [config ...]
configs: wg_mv (TrainerMon: gradients before/after reduction + AdamW states, ops norm/min/max/nans, alerts on),
         xy_all (TrainerMon: every module's inputs, outputs and their gradients, same ops),
         grad_probe_L2 (grad_probe, level L2, bounds [-1, 0, 1])
Runs, in one process, the training loop without and with the monitor (alternating, REPEATS times, default 2;
the lowest median step time of each side over steps 2..STEPS, env STEPS default 6) and prints one JSON line per
config with the ratio and whether the losses were bit-identical.
CLOCK=cpu measures process CPU time (all threads of this process) instead of wall time: on a machine shared
with other jobs it is far less disturbed by them, and every CPU-second the monitor adds is still counted.
THREADS (default 2) sets torch's thread count; THREADS=1 CLOCK=cpu avoids the OpenMP spin-waiting that
inflates CPU time when the cores are oversubscribed.
"""
import json
import os
import statistics
import sys
import time

import torch
import torch.nn as nn
from dump_overhead import GPT
from overhead_runner import run_configs

STEPS = int(os.environ.get("STEPS", "6"))
REPEATS = int(os.environ.get("REPEATS", "2"))
CLOCK = time.process_time if os.environ.get("CLOCK") == "cpu" else time.perf_counter
TARGETS = {"wg_mv": 1.1, "xy_all": 1.3, "grad_probe_L2": 1.1}
OPS = ["norm", "min", "max", "nans"]
ALERT = {"rules": [{"rule_name": "AnomalyTurbulence", "args": {"threshold": 0.5}}]}


def _attach(config, dump_path, model, optimizer):
    """Start the monitor of `config`; returns the function that removes it."""
    os.makedirs(dump_path, exist_ok=True)
    cfg_path = os.path.join(dump_path, "config.json")
    if config == "grad_probe_L2":
        from msprobe.core.config import parse_config
        from msprobe.pytorch.monitor.grad_probe import GradProbe

        probe = GradProbe(parse_config({"task": "grad_probe", "dump_path": os.path.join(dump_path, "dump"),
                                        "grad_probe": {"grad_level": "L2", "bounds": [-1, 0, 1]}}))
        probe.monitor(model)
        return probe.stop
    keys = {"wg_mv": {"wg_distribution": True, "mv_distribution": True},
            "xy_all": {"xy_distribution": True, "all_xy": True}}[config]
    with open(cfg_path, "w", encoding="utf-8") as handle:
        json.dump({**keys, "format": "csv", "ops": OPS, "alert": ALERT, "plots": False}, handle)
    os.environ["MONITOR_OUTPUT_DIR"] = os.path.join(dump_path, "monitor_output")
    from msprobe.pytorch.monitor import TrainerMon

    monitor = TrainerMon(cfg_path, params_have_main_grad=False).set_monitor(model, optimizer=optimizer)
    return monitor.remove


def train(config=None, dump_path=None):
    torch.manual_seed(0)
    model = GPT()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    detach = _attach(config, dump_path, model, optimizer) if config else None
    times, losses = [], []
    for _ in range(STEPS):
        idx = torch.randint(0, 1000, (8, 128))
        tgt = torch.randint(0, 1000, (8, 128))
        t0 = CLOCK()
        loss = nn.functional.cross_entropy(model(idx).view(-1, 1000), tgt.view(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        times.append(CLOCK() - t0)
        losses.append(loss.item())
    if detach:
        detach()
    return statistics.median(times[2:]), losses


def main(configs):
    threads = int(os.environ.get("THREADS", "2"))
    torch.set_num_threads(threads)
    run_configs(train, configs, STEPS, REPEATS, TARGETS, clock=os.environ.get("CLOCK", "wall"), threads=threads)


if __name__ == "__main__":
    main(sys.argv[1:] or list(TARGETS))
