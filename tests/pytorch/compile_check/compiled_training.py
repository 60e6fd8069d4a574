"""A few SGD steps of a torch.compile'd (Inductor) model with and without the debugger: the bit-identity tests of
compiled dumps and the GPU machine's `compiled` check (benchmarks/gpu_check.py) train through this one loop."""
import json
import os

import torch
import torch.nn as nn

from msprobe.pytorch import PrecisionDebugger

__all__ = ["plain_model", "train_compiled"]


def plain_model(width=8, hidden=16, out=4):
    return nn.Sequential(nn.Linear(width, hidden), nn.LayerNorm(hidden), nn.GELU(), nn.Linear(hidden, out))


def train_compiled(level=None, dump_path=None, per_module=False, build=plain_model, shadow=False,
                   dtype=torch.float32, device="cpu", batch=(5, 8), steps=3, backend="inductor"):
    """`steps` SGD steps of `build()` compiled with `backend` (whole, or each submodule through its own
    torch.compile, called one after the other; backend None: not compiled); with `level`, every step under the
    debugger (its config written to dump_path/config.json, the dump under dump_path/dump). Returns the parameters
    and buffers after, on the host. Each run starts from a reset Dynamo, as in a fresh process: what Dynamo
    compiled before (the same frames with other shapes, recompile limits, its caches) changes what it compiles
    next."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = build().to(device, dtype)
    if per_module:
        pieces = [torch.compile(module, backend=backend) for module in model]

        def compiled(x):
            for piece in pieces:
                x = piece(x)
            return x
    else:
        compiled = torch.compile(model, backend=backend) if backend is not None else model
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    debugger = None
    if level:
        os.makedirs(dump_path, exist_ok=True)
        config = os.path.join(dump_path, "config.json")
        with open(config, "w") as handle:
            json.dump({"task": "statistics", "level": level, "dump_path": os.path.join(dump_path, "dump"),
                       "statistics": {"shadow_compiled": shadow}}, handle)
        debugger = PrecisionDebugger(config_path=config, model=compiled)
    generator = torch.Generator().manual_seed(1)
    for _ in range(steps):
        x = torch.randn(*batch, generator=generator).to(device, dtype)
        if debugger:
            debugger.start()
        out = compiled(x)
        (out if out.dtype == torch.float32 else out.float()).pow(2).mean().backward()
        optimizer.step()
        optimizer.zero_grad()
        if debugger:
            debugger.stop()
            debugger.step()
    if debugger:
        debugger.close()
    return [t.detach().cpu().clone() for t in list(model.parameters()) + list(model.buffers())]
