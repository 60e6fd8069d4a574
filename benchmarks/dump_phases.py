"""Where a dump's overhead sits in a training step: forward, backward, optimizer, and the debugger's stop/step.

usage: [MODEL=llama] [ROUNDS=3] [BLOCK=5] python benchmarks/dump_phases.py [CONFIG ...]   (CONFIG as in dump_overhead.py,
default statistics:L1)

Trains the model of dump_overhead.py (2 threads) in one process: after two warm-up pairs, ROUNDS times a block of
BLOCK plain steps then a block of BLOCK dumped steps; the first step of each block is not counted (a plain step
right after a dumped one pays for what the dump left behind: it is reported on its own). Prints one JSON line per
config: the median milliseconds of each phase without and with the debugger, their differences, the minor page
faults of each phase in the training thread (memory the allocator had to map afresh), and the first plain step
after a dumped block. A phase's difference is what the dump costs there: the forward pays the per-call path of
every API call, the backward the gradient hooks and their records, the optimizer the per-call path of its
in-place updates and the reading of every parameter-sized tensor they write.
"""
import json
import os
import resource
import statistics
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dump_overhead as bench  # noqa: E402

ROUNDS = int(os.environ.get("ROUNDS", "3"))
BLOCK = int(os.environ.get("BLOCK", "5"))
PHASES = ("forward", "backward", "optimizer", "stop_step")


def _faults():
    return resource.getrusage(resource.RUSAGE_THREAD).ru_minflt  # the training thread's own (RUSAGE_SELF waits on busy threads)


def phased_step(forward, opt, debugger, batch, vocab):
    """One training step, timed phase by phase: ({phase: ms}, {phase: minor faults})."""
    idx, tgt = torch.randint(0, vocab, batch), torch.randint(0, vocab, batch)
    marks = []
    bench.training_step(forward, opt, debugger, idx, tgt, vocab, mark=lambda: marks.append((time.perf_counter(),
                                                                                          _faults())))
    times = {phase: (marks[i + 1][0] - marks[i][0]) * 1e3 for i, phase in enumerate(PHASES)}
    faults = {phase: marks[i + 1][1] - marks[i][1] for i, phase in enumerate(PHASES)}
    return times, faults


def measure(config):
    from msprobe.pytorch import PrecisionDebugger

    torch.manual_seed(0)
    forward, model, batch, vocab = bench.make_model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    work = tempfile.mkdtemp(prefix="msprobe_phases_")
    debugger = PrecisionDebugger(config_path=bench.write_config(config, os.path.join(work, "dump")), model=model)
    for _ in range(2):
        phased_step(forward, opt, None, batch, vocab)
        phased_step(forward, opt, debugger, batch, vocab)
    plain, dumped, after = [], [], []
    for _ in range(ROUNDS):  # blocks of BLOCK steps each way; a block's first step is not counted (see below)
        first = phased_step(forward, opt, None, batch, vocab)
        after.append(first)
        plain.extend(phased_step(forward, opt, None, batch, vocab) for _ in range(BLOCK - 1))
        phased_step(forward, opt, debugger, batch, vocab)
        dumped.extend(phased_step(forward, opt, debugger, batch, vocab) for _ in range(BLOCK - 1))
    debugger.close()

    def medians(runs, index):
        return {phase: round(statistics.median(run[index][phase] for run in runs), 1) for phase in PHASES}
    without, with_ = medians(plain, 0), medians(dumped, 0)
    step_without = statistics.median(sum(run[0].values()) for run in plain)
    step_with = statistics.median(sum(run[0].values()) for run in dumped)
    return {"model": bench.MODEL, "config": config, "rounds": ROUNDS, "ms_without": without, "ms_with": with_,
            "ms_added": {phase: round(with_[phase] - without[phase], 1) for phase in PHASES},
            "step_ms_without": round(step_without, 1), "step_ms_with": round(step_with, 1),
            "ratio": round(step_with / step_without, 3),
            "minor_faults_without": medians(plain, 1), "minor_faults_with": medians(dumped, 1),
            "first_plain_step_after_dumped_ms": round(statistics.median(sum(run[0].values()) for run in after), 1)}


def main(configs):
    torch.set_num_threads(2)
    for config in configs:
        print(json.dumps(measure(config)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or ["statistics:L1"])
