"""A hand-written tensor-parallel MLP (column- then row-parallel linear) dumped with msprobe statistics.

    python tp_job.py ROOT PORT WORLD [MODE]     WORLD 1: the same model unsharded (a 1-process gloo group)
      MODE clean (default)   every rank computes its shard exactly
      MODE fault             rank 1 computes its shard of the GELU with the tanh approximation

Both runs build the full fc1 (8 -> 16) and fc2 (16 -> 8) from one seed; rank r of WORLD keeps rows
r*16/WORLD.. of fc1 (weight, bias: Shard(0); output: Shard(-1)) and the matching columns of fc2 (weight:
Shard(1)); fc2's partial output is summed by an all_reduce, as Megatron's row-parallel linear does.
With WORLD 1 every all_reduce is an identity, so both dumps hold the same calls under the same names.
"""
import datetime
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

FULL_IN, HIDDEN, TOKENS, SEED = 8, 16, 6, 1234


def full_model():
    """fc1, fc2 and the input tokens of the unsharded model (the test recomputes statistics from them)."""
    torch.manual_seed(SEED)
    fc1, fc2 = torch.nn.Linear(FULL_IN, HIDDEN), torch.nn.Linear(HIDDEN, FULL_IN)
    return fc1, fc2, torch.randn(TOKENS, FULL_IN)


class _CopyToTP(torch.autograd.Function):
    """Identity forward; the backward sums the input's gradient over the tensor-parallel ranks."""
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        dist.all_reduce(grad)
        return grad


class _ReduceFromTP(torch.autograd.Function):
    """All-reduce forward (the row-parallel partial sums); identity backward."""
    @staticmethod
    def forward(ctx, x):
        x = x.clone()
        dist.all_reduce(x)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad


class TPMLP(torch.nn.Module):
    def __init__(self, rank, world, approximate):
        super().__init__()
        fc1, fc2, _ = full_model()
        rows = slice(rank * HIDDEN // world, (rank + 1) * HIDDEN // world)
        self.w1 = torch.nn.Parameter(fc1.weight.detach()[rows].clone())
        self.b1 = torch.nn.Parameter(fc1.bias.detach()[rows].clone())
        self.w2 = torch.nn.Parameter(fc2.weight.detach()[:, rows].clone())
        self.b2 = torch.nn.Parameter(fc2.bias.detach().clone())
        self.approximate = approximate

    def forward(self, x):
        h = F.linear(_CopyToTP.apply(x), self.w1, self.b1)        # column-parallel: a shard of the hidden dim
        h = F.gelu(h, approximate=self.approximate)
        y = _ReduceFromTP.apply(F.linear(h, self.w2))             # row-parallel: partial sums, then all_reduce
        return y + self.b2


def worker(rank, root, port, world, mode):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo")
    torch.set_num_threads(1)
    from msprobe.pytorch import PrecisionDebugger

    cfg_path = os.path.join(root, f"cfg{rank}.json")
    with open(cfg_path, "w") as handle:
        json.dump({"task": "statistics", "dump_path": os.path.join(root, "dump"), "level": "L1",
                   "statistics": {"data_mode": ["all"]}}, handle)
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=60))
    model = TPMLP(rank, world, "tanh" if (mode == "fault" and rank == 1) else "none")
    debugger = PrecisionDebugger(config_path=cfg_path)
    _, _, x = full_model()
    debugger.start()
    model(x).pow(2).mean().backward()
    debugger.stop()
    debugger.step()
    debugger.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    world_size = int(sys.argv[3])
    mp.spawn(worker, args=(sys.argv[1], int(sys.argv[2]), world_size, (sys.argv[4:] or ["clean"])[0]),
             nprocs=world_size, join=True)
