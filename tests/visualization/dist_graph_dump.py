"""Dump one mix-level training step of a 2-rank gloo run with collectives and send/recv:
`python dist_graph_dump.py OUT_DIR PORT`."""
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def _worker(rank, out_dir, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    from msprobe.pytorch import PrecisionDebugger

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    config_path = os.path.join(out_dir, f"config{rank}.json")
    with open(config_path, "w") as handle:
        json.dump({"task": "statistics", "dump_path": out_dir, "level": "mix"}, handle)
    debugger = PrecisionDebugger(config_path=config_path, model=model)
    debugger.start()
    loss = model(torch.randn(2, 4, generator=torch.Generator().manual_seed(rank))).pow(2).mean()
    loss.backward()
    for param in model.parameters():
        dist.all_reduce(param.grad)
    buffer = torch.full((3,), float(rank))
    if rank == 0:
        dist.send(buffer, dst=1)
    else:
        dist.recv(buffer, src=0)
    debugger.stop()
    debugger.step()
    debugger.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    mp.spawn(_worker, args=(out, int(sys.argv[2])), nprocs=2)
