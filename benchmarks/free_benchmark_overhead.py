"""Overhead of free_benchmark (check of every API) on the GPT-style model of dump_overhead.py (CPU, 2 threads).

usage: python benchmarks/free_benchmark_overhead.py [MODE ...]
MODE is a pert_mode, optionally with ":backward" or ":fix" (default: bit_noise improve_precision no_change
improve_precision:fix). Each is run with "list": [] and "scope": [] (every API), alternating with runs
without the tool (REPEATS, default 2; STEPS, default 6), one JSON line per mode as dump_overhead.py prints.
The model is float32, so improve_precision has nothing to raise (the cost of routing only); bit_noise and
no_change re-run and compare every API. Target (issue 13): check of every API <= 3x.
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dump_overhead import GPT, STEPS, timed_steps  # noqa: E402 - the same model and loop
from overhead_runner import run_configs  # noqa: E402

REPEATS = int(os.environ.get("REPEATS", "2"))
DEFAULT_MODES = ["bit_noise", "improve_precision", "no_change", "improve_precision:fix"]


def train(mode=None, dump_path=None):
    torch.manual_seed(0)
    model = GPT()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    debugger = None
    if mode:
        from msprobe.pytorch import PrecisionDebugger
        pert_mode, _, variant = mode.partition(":")
        section = {"pert_mode": pert_mode, "list": [], "scope": []}
        if variant == "backward":
            section["fuzz_stage"] = "backward"
        if variant == "fix":
            section["handler_type"] = "fix"
        cfg_path = dump_path + ".config.json"
        with open(cfg_path, "w") as handle:
            json.dump({"task": "free_benchmark", "dump_path": dump_path, "level": "L1",
                       "free_benchmark": section}, handle)
        debugger = PrecisionDebugger(config_path=cfg_path)
    return timed_steps(model, opt, debugger)


def main(modes):
    torch.set_num_threads(2)
    run_configs(train, modes, STEPS, REPEATS, {mode: 3.0 for mode in modes if not mode.endswith(":backward")})


if __name__ == "__main__":
    main(sys.argv[1:] or DEFAULT_MODES)
