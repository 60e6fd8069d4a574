"""Overhead of the MindSpore TrainerMon on the GPT-style model of benchmarks/ms_dump_overhead.py (CPU, PyNative).

usage: python benchmarks/ms_monitor_overhead.py [config ...]
configs: wg_mv (gradients handed to the optimizer + AdamWeightDecay moments, ops norm/min/max/nans, alerts on),
         xy_forward (every cell's inputs and outputs, forward only), xy_all (and their gradients).
Same method as the other overhead benchmarks (benchmarks/overhead_runner.py): baseline and monitored runs
alternate REPEATS times (default 2) in one process; one JSON line per config with the lowest median step
time of each side over steps 2..STEPS (default 6), their ratio and whether the losses were bit-identical.
The targets are the PyTorch monitor's (issue 14); MindSpore's own cell-hook machinery costs part of them
(an empty forward hook on every cell: ~1.3x on a small MLP).
"""
import json
import os
import sys

import mindspore as ms
from mindspore import nn

from ms_dump_overhead import GPT, timed_training
from overhead_runner import run_configs

STEPS = int(os.environ.get("STEPS", "6"))
REPEATS = int(os.environ.get("REPEATS", "2"))
TARGETS = {"wg_mv": 1.1, "xy_forward": 1.3, "xy_all": 1.3}
OPS = ["norm", "min", "max", "nans"]
CONFIGS = {"wg_mv": {"wg_distribution": True, "mv_distribution": True},
           "xy_forward": {"xy_distribution": True, "all_xy": True, "forward_only": True},
           "xy_all": {"xy_distribution": True, "all_xy": True}}


def train(config=None, dump_path=None):
    ms.set_seed(0)
    model = GPT()
    opt = nn.AdamWeightDecay(model.trainable_params(), 1e-3)
    monitor = None
    if config:
        from msprobe.mindspore.monitor import TrainerMon

        os.makedirs(dump_path, exist_ok=True)
        cfg_path = os.path.join(dump_path, "monitor_config.json")
        with open(cfg_path, "w", encoding="utf-8") as handle:
            json.dump({**CONFIGS[config], "format": "csv", "ops": OPS, "plots": False,
                       "alert": {"rules": [{"rule_name": "AnomalyTurbulence", "args": {"threshold": 0.5}}]}}, handle)
        os.environ["MONITOR_OUTPUT_DIR"] = os.path.join(dump_path, "monitor_output")
        monitor = TrainerMon(cfg_path).set_monitor(model, optimizer=opt)

    result = timed_training(model, opt, STEPS)
    if monitor is not None:
        monitor.remove()
    return result


def main(configs):
    ms.set_device("CPU")
    ms.set_context(mode=ms.PYNATIVE_MODE)
    run_configs(train, configs, STEPS, REPEATS, TARGETS, framework="mindspore")


if __name__ == "__main__":
    main(sys.argv[1:] or list(CONFIGS))
