"""A 4-process gloo job for nan_analyze tests: rank 2 makes a NaN at step 1, an all_reduce spreads it.

    python nan_job.py ROOT PORT TASK       (TASK: statistics | overflow_check)
"""
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

WORLD = 4
BAD_RANK, BAD_STEP = 2, 1


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = torch.nn.Linear(6, 6)
        self.outer = torch.nn.Linear(6, 2)

    def forward(self, x, sign):
        h = torch.relu(self.inner(x))
        h = torch.sqrt((h + 1) * sign)          # rank 2, step 1: sqrt of negatives -> NaN
        dist.all_reduce(h)                      # tensor-parallel style: spreads it to every rank
        return self.outer(h)


def worker(rank, root, port, task):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo")
    torch.set_num_threads(1)
    from msprobe.pytorch import PrecisionDebugger, seed_all
    seed_all(1234)
    cfg_path = os.path.join(root, f"cfg{rank}.json")
    with open(cfg_path, "w") as handle:
        json.dump({"task": task, "dump_path": os.path.join(root, "dump"), "level": "mix",
                   task: {"overflow_nums": -1} if task == "overflow_check" else {}}, handle)
    model = Block()
    debugger = PrecisionDebugger(config_path=cfg_path, model=model)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD, timeout=__import__("datetime").timedelta(seconds=60))
    for step in range(2):
        debugger.start()
        sign = -1.0 if (rank, step) == (BAD_RANK, BAD_STEP) else 1.0
        loss = model(torch.randn(3, 6) + rank, sign).sum()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
        debugger.stop()
        debugger.step()
    debugger.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(worker, args=(sys.argv[1], int(sys.argv[2]), sys.argv[3]), nprocs=WORLD, join=True)
