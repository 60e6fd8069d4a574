"""Where a recorded call's time goes: cProfile of the dump hooks, grouped by part, per recorded call.

usage: [MODEL=llama] [N=3] python benchmarks/hot_path_profile.py CONFIG   (CONFIG as in dump_overhead.py:
statistics:L1, statistics:mix, md5:L1). Trains the model of dump_overhead.py (one thread) for 2 warm-up
steps and N profiled steps under the debugger, counts the recorded calls (DumpCollector.begin_forward) and
prints one JSON line: profiled seconds per step and, per part of the hot path, microseconds per recorded
call. The profiler inflates small functions and a loaded machine inflates everything: read the shares.
"""
import cProfile
import json
import os
import pstats
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dump_overhead as bench  # noqa: E402

# part -> (file substring, function name or None for every function of the file, cumulative time?)
PARTS = {
    "hook entry": [("api_hooks.py", None, False), ("module_hooks.py", None, False),
                   ("dump_session.py", None, False), ("dump/session.py", None, False), ("contextlib.py", None, False)],
    "guard + filter/routing": [("filters.py", None, False), ("guard.py", None, False)],
    "name": [("collector.py", "__init__", False), ("collector.py", "begin_forward", False),
             ("collector.py", "backward_name", False)],
    "stack capture": [("stack.py", None, False)],
    "argument walk": [("record.py", fn, False) for fn in ("describe", "describe_args", "<listcomp>", "<dictcomp>",
                                                          "describe_kwargs", "describe_output", "_child",
                                                          "describe_plain")],
    "tensor facts + stats key": [("adapter.py", fn, False) for fn in ("tensor_facts", "_content_key",
                                                                       "_dense_order", "memory_owner")],
    "statistics kernel": [("adapter.py", "tensor_stats", True)],
    "md5": [("record.py", "_crc", True)],
    "record building": [("record.py", "describe_tensor", False), ("collector.py", "end_forward", False),
                        ("collector.py", "commit", False), ("collector.py", "_offer", False), ("tasks", None, False)],
    "gradient tracking": [("grad_tracker.py", None, False)],
    "writer hand-over": [("collector.py", "flush", True), ("writer.py", None, False)],
}


def profile(config, steps):
    """(pstats table, recorded calls) of `steps` steps under the debugger, after two warm-up steps."""
    from msprobe.core.dump import collector as collector_module
    from msprobe.pytorch import PrecisionDebugger

    torch.set_num_threads(1)
    torch.manual_seed(0)
    forward, model, batch, vocab = bench.make_model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    debugger = PrecisionDebugger(config_path=bench.write_config(config, tempfile.mkdtemp() + "/dump"), model=model)

    def run(count):
        for _ in range(count):
            bench.training_step(forward, opt, debugger, torch.randint(0, vocab, batch), torch.randint(0, vocab, batch),
                                vocab)

    run(2)
    calls = [0]
    original = collector_module.DumpCollector.begin_forward

    def counting(self, *args, **kwargs):
        calls[0] += 1
        return original(self, *args, **kwargs)

    collector_module.DumpCollector.begin_forward = counting
    profiler = cProfile.Profile()
    profiler.enable()
    run(steps)
    profiler.disable()
    collector_module.DumpCollector.begin_forward = original
    debugger.close()
    return pstats.Stats(profiler).stats, calls[0]


def main(config):
    steps = int(os.environ.get("N", "3"))
    table, calls = profile(config, steps)
    per_part = {}
    for part, rules in PARTS.items():
        seconds = 0.0
        for (file_name, _, function), (_, _, own, cumulative, _) in table.items():
            for where, name, use_cumulative in rules:
                if where in file_name and (name is None or name == function):
                    seconds += cumulative if use_cumulative else own
        per_part[part] = round(seconds / max(calls, 1) * 1e6, 1)
    total = sum(own for (_, _, own, _, _) in table.values())
    print(json.dumps({"config": config, "model": bench.MODEL, "recorded_calls_per_step": calls / steps,
                      "profiled_s_per_step": round(total / steps, 4), "us_per_recorded_call": per_part}))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "statistics:L1")
