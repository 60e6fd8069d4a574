"""Dump a 2-rank gloo training step with msprobe: `python dist_dump.py OUT_DIR SEED`."""
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def _worker(rank, out_dir, seed, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    import json

    from compare_models import MLP
    from msprobe.pytorch import PrecisionDebugger

    torch.manual_seed(seed)
    model = MLP()
    config_path = os.path.join(out_dir, f"config{rank}.json")
    with open(config_path, "w") as handle:
        json.dump({"task": "statistics", "dump_path": out_dir, "rank": [], "step": [], "level": "L1",
                   "statistics": {"scope": [], "list": [], "data_mode": ["all"]}}, handle)
    debugger = PrecisionDebugger(config_path=config_path, model=model)
    x = torch.randn(8, 16, generator=torch.Generator().manual_seed(100 + rank))
    debugger.start()
    loss = model(x).pow(2).mean()
    loss.backward()
    for param in model.parameters():
        dist.all_reduce(param.grad)
    debugger.stop()
    debugger.step()
    debugger.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    out, seed = sys.argv[1], int(sys.argv[2])
    os.makedirs(out, exist_ok=True)
    mp.spawn(_worker, args=(out, seed, int(sys.argv[3]) if len(sys.argv) > 3 else 29511), nprocs=2)
