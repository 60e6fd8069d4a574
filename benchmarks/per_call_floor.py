"""The floor of any per-call statistics dump on this machine: what a TorchFunctionMode costs that does nothing
but read each tensor content it sees, against msprobe's own L1 dump, in one process.

usage: [MODEL=llama] [ROUNDS=20] python benchmarks/per_call_floor.py

Trains the model of dump_overhead.py (2 threads) and alternates, step by step, six ways of running a step:

- `plain`: no mode;
- `bare`: a Python TorchFunctionMode whose `__torch_function__` only calls the function (what any per-call
  design pays to see the calls at all);
- `read_all`: the bare mode reading every dense float32 tensor argument before the call and the tensor output
  after it with msprobe's C statistics kernel (max, min, mean, norm in one pass);
- `read_once`: the same, but each content read once (keyed by address, version counter and length, as the dump's
  own cache is): the bytes a statistics L1 dump must read in the forward and the optimizer;
- `read_once_grads`: `read_once`, and each output's grad read once in the backward (a tensor hook on every
  output that has a grad_fn): the bytes statistics L1 must read in the whole step;
- `msprobe`: `PrecisionDebugger` statistics L1 (the same calls, plus their names, records, backward grads, stacks
  and files).

`read_once_grads` is a lower bound of statistics L1, not an estimate of it: it keeps no record, names nothing and
writes no file (the grads of the inputs it leaves out are mostly other calls' output grads). A target below its
ratio cannot be met on this machine by any design that takes the statistics in place after each call, whatever
the bookkeeping costs. Prints one JSON line: each way's median step in ms and its ratio to `plain`.
"""
import json
import os
import statistics
import sys
import tempfile
import time

import torch
from torch.overrides import TorchFunctionMode

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dump_overhead as bench  # noqa: E402

from msprobe.core.dump import native  # noqa: E402

ROUNDS = int(os.environ.get("ROUNDS", "20"))
_Tensor, _Parameter, _f32 = torch.Tensor, torch.nn.Parameter, torch.float32


class BareMode(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


class ReadingMode(TorchFunctionMode):
    """Reads dense float32 arguments before and the tensor output after each call; `once`: each content once."""

    def __init__(self, once, grads=False):
        super().__init__()
        self.seen = {} if once else None
        self.grads = grads

    def _read(self, tensor):
        if type(tensor) in (_Tensor, _Parameter) and tensor.dtype is _f32 and tensor.is_contiguous():
            count = tensor.numel()
            if not count:
                return
            address = tensor.data_ptr()
            if self.seen is not None:
                key = (address, tensor._version, count)
                if key in self.seen:
                    return
                self.seen[key] = True
            native.float_stats(address, count, 4, None)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        with torch._C.DisableTorchFunctionSubclass():
            for arg in args:
                if isinstance(arg, _Tensor):
                    self._read(arg)
        output = func(*args, **(kwargs or {}))
        if isinstance(output, _Tensor):
            with torch._C.DisableTorchFunctionSubclass():
                self._read(output)
                if self.grads and output.grad_fn is not None:
                    output.register_hook(self._read_grad)
        return output

    def _read_grad(self, grad):
        with torch._C.DisableTorchFunction():
            self._read(grad)


class ModeWindow:
    """start/stop/step of a debugger, for a mode made afresh each step."""

    def __init__(self, make):
        self.make, self.mode = make, None

    def start(self):
        self.mode = self.make()
        self.mode.__enter__()

    def stop(self):
        self.mode.__exit__(None, None, None)

    def step(self):
        pass


def main():
    if native.float_stats is None:
        sys.exit("per_call_floor.py needs the C statistics kernel (msprobe/_native/_stats.c built)")
    from msprobe.pytorch import PrecisionDebugger

    torch.set_num_threads(2)
    torch.manual_seed(0)
    forward, model, batch, vocab = bench.make_model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    work = tempfile.mkdtemp(prefix="msprobe_floor_")
    debugger = PrecisionDebugger(config_path=bench.write_config("statistics:L1", os.path.join(work, "dump")),
                                 model=model)
    ways = {"plain": None, "bare": ModeWindow(BareMode), "read_all": ModeWindow(lambda: ReadingMode(False)),
            "read_once": ModeWindow(lambda: ReadingMode(True)),
            "read_once_grads": ModeWindow(lambda: ReadingMode(True, grads=True)), "msprobe": debugger}
    times = {name: [] for name in ways}

    def step(window):
        idx, tgt = torch.randint(0, vocab, batch), torch.randint(0, vocab, batch)
        start = time.perf_counter()
        bench.training_step(forward, opt, window, idx, tgt, vocab)
        return time.perf_counter() - start

    for window in ways.values():  # warm-up
        step(window)
        step(window)
    for _ in range(ROUNDS):
        for name, window in ways.items():
            step(window)  # the first step after another way pays for what that way left behind
            times[name].extend(step(window) for _ in range(2))
    debugger.close()
    plain = statistics.median(times["plain"])
    print(json.dumps({"model": bench.MODEL, "rounds": ROUNDS,
                      **{name: {"step_ms": round(statistics.median(t) * 1e3, 1),
                                "ratio": round(statistics.median(t) / plain, 3)} for name, t in times.items()}}))


if __name__ == "__main__":
    main()
