"""Overhead of overflow_check against a statistics L1 dump of the same model (CPU, 2 threads).

usage: python benchmarks/overflow_overhead.py
Trains the GPT-style model of benchmarks/dump_overhead.py (that of /work/shared/bench/dump_overhead.py) in one
process without the debugger, with task statistics L1 and with task overflow_check L1 (alternating, REPEATS
times, default 2), and prints one JSON line per config as dump_overhead.py does, then a line comparing the two
ratios. Target: the overflow_check ratio is at most the statistics L1 ratio (a finite run costs statistics only:
no tensor copies, no files). The flight_recorder task (depth 64, statistics only) runs too: target <= 1.3x while
nothing overflows.
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dump_overhead import STEPS, train  # noqa: E402 - the same model and loop
from overhead_runner import run_configs  # noqa: E402

REPEATS = int(os.environ.get("REPEATS", "2"))
CONFIGS = ["statistics:L1", "overflow_check:L1", "flight_recorder:L1"]


def main():
    torch.set_num_threads(2)
    results = run_configs(train, CONFIGS, STEPS, REPEATS, {"statistics:L1": 1.3, "flight_recorder:L1": 1.3})
    ratios = {result["config"]: result["ratio"] for result in results}
    print(json.dumps({"overflow_check_ratio": ratios["overflow_check:L1"], "statistics_ratio": ratios["statistics:L1"],
                      "target": "overflow_check <= statistics",
                      "target_met": ratios["overflow_check:L1"] <= ratios["statistics:L1"]}))
    print(json.dumps({"flight_recorder_ratio": ratios["flight_recorder:L1"], "target": "flight_recorder <= 1.3",
                      "target_met": ratios["flight_recorder:L1"] <= 1.3}))


if __name__ == "__main__":
    main()
