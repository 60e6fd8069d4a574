"""Two CPU ranks with the gloo backend: one rank dir each, collectives recorded."""
import json
import subprocess
import sys
import textwrap

WORKER = textwrap.dedent("""
    import json, os, sys
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp

    def worker(rank, root, port):
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        torch.set_num_threads(1)
        from msprobe.pytorch import PrecisionDebugger, seed_all
        seed_all(1234)
        cfg_path = os.path.join(root, f"cfg{rank}.json")
        json.dump({"task": "statistics", "dump_path": os.path.join(root, "dump"), "level": "mix",
                   "statistics": {}}, open(cfg_path, "w"))
        model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1))
        debugger = PrecisionDebugger(config_path=cfg_path, model=model)   # before init_process_group
        dist.init_process_group("gloo", rank=rank, world_size=2)
        for step in range(2):
            debugger.start()
            loss = model(torch.randn(5, 4) + rank).pow(2).mean()
            loss.backward()
            for p in model.parameters():
                dist.all_reduce(p.grad)
            debugger.stop()
            debugger.step()
        debugger.close()
        dist.destroy_process_group()

    if __name__ == "__main__":
        mp.spawn(worker, args=(sys.argv[1], int(sys.argv[2])), nprocs=2, join=True)
""")


def test_two_gloo_ranks_write_their_own_dirs(tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    port = 29500 + (abs(hash(str(tmp_path))) % 2000)
    proc = subprocess.run([sys.executable, str(script), str(tmp_path), str(port)], capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    root = tmp_path / "dump"
    for step in (0, 1):
        assert sorted(p.name for p in (root / f"step{step}").iterdir()) == ["rank0", "rank1"]
    dumps = [json.loads((root / "step1" / f"rank{r}" / "dump.json").read_text())["data"] for r in (0, 1)]
    for data in dumps:
        names = list(data)
        assert [n for n in names if n.startswith("Distributed.all_reduce")] == [
            f"Distributed.all_reduce.{i}.forward" for i in range(4)]
        entry = data["Distributed.all_reduce.0.forward"]
        assert entry["input_args"][0]["shape"] == [3, 4]
        assert "Module.0.Linear.backward.0" in names
    # the inputs differ per rank, the all-reduced gradients are identical
    assert dumps[0]["Functional.linear.0.forward"]["input_args"][0]["Mean"] != \
        dumps[1]["Functional.linear.0.forward"]["input_args"][0]["Mean"]
    out0 = dumps[0]["Distributed.all_reduce.0.forward"]["output"][0]
    out1 = dumps[1]["Distributed.all_reduce.0.forward"]["output"][0]
    assert out0["Max"] == out1["Max"] and out0["Norm"] == out1["Norm"]
