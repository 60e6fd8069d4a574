"""An MLP made tensor-parallel by torch's parallelize_module (DTensor), dumped with msprobe statistics (level mix).

    python dtensor_job.py ROOT PORT WORLD [MODE]     WORLD 1: the same model on a 1-rank mesh
      MODE clean (default)   every rank computes its shard exactly
      MODE fault             rank 1 scales its shard of the GELU's output by 1.5 (a fault in one shard)
      MODE tensor            as clean, with the tensor task (every tensor saved) instead of statistics

fc1 (8 -> 16) is ColwiseParallel (its output kept a DTensor), fc2 (16 -> 8) RowwiseParallel; both runs build
the full model from one seed. Each rank also saves its parameters' and gradients' local shards (local{rank}.pt).
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


class MLP(torch.nn.Module):
    def __init__(self, fault=False):
        super().__init__()
        torch.manual_seed(SEED)
        self.fc1, self.fc2 = torch.nn.Linear(FULL_IN, HIDDEN), torch.nn.Linear(HIDDEN, FULL_IN)
        self.fault = fault

    def forward(self, x):
        hidden = F.gelu(self.fc1(x))
        if self.fault:  # on the local shard only, then back into the DTensor: rank 1's half is wrong
            from torch.distributed.tensor import DTensor

            hidden = DTensor.from_local(hidden.to_local() * 1.5, hidden.device_mesh, hidden.placements)
        return self.fc2(hidden)


def inputs():
    torch.manual_seed(SEED + 1)
    return torch.randn(TOKENS, FULL_IN)


def worker(rank, root, port, world, mode):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo")
    torch.set_num_threads(1)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    from msprobe.pytorch import PrecisionDebugger

    cfg_path = os.path.join(root, f"cfg{rank}.json")
    with open(cfg_path, "w") as handle:
        task = "tensor" if mode == "tensor" else "statistics"
        json.dump({"task": task, "dump_path": os.path.join(root, "dump"), "level": "mix",
                   task: {"data_mode": ["all"]}}, handle)
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=60))
    mesh = init_device_mesh("cpu", (world,))
    # fc1's output stays a DTensor (Shard(-1)) through the GELU, so every sharded row records its placement
    model = parallelize_module(MLP(fault=mode == "fault" and rank == 1), mesh,
                               {"fc1": ColwiseParallel(use_local_output=False), "fc2": RowwiseParallel()})
    debugger = PrecisionDebugger(config_path=cfg_path)
    debugger.start(model)
    model(inputs()).pow(2).mean().backward()
    debugger.stop()
    debugger.step()
    debugger.close()
    local = {name: param.to_local().detach() for name, param in model.named_parameters()}
    grads = {name: param.grad.to_local().detach() for name, param in model.named_parameters()}
    torch.save({"params": local, "grads": grads}, os.path.join(root, f"local{rank}.pt"))
    dist.destroy_process_group()


if __name__ == "__main__":
    world_size = int(sys.argv[3])
    mp.spawn(worker, args=(sys.argv[1], int(sys.argv[2]), world_size, (sys.argv[4:] or ["clean"])[0]),
             nprocs=world_size, join=True)
