"""Train an MLP for 6 steps with TrainerMon (csv) or grad_probe writing onto a small tmpfs that is filled up
before step 2, so every later write meets a real ENOSPC. test_full_disk.py runs this inside `unshare -rm`:
its own mount namespace, where the tmpfs is mounted and from which it goes when the process ends.

argv: tool (monitor | grad_probe), tmpfs mount point, folder for the config file.
Prints `LOSSES <json>` (with the tool) and `REFERENCE <json>` (without it, same seeds)."""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from monitor_models import mlp, train_mlp, write_config  # noqa: E402

FILL_AT = 2
STEPS = 6


def fill(folder):
    """Write a file until the file system says ENOSPC."""
    chunk = b"\0" * 65536
    with open(os.path.join(folder, "filler"), "wb", buffering=0) as handle:
        for _ in range(100000):  # bounded: a tmpfs of a few MB fills long before
            try:
                handle.write(chunk)
            except OSError:
                return
    raise RuntimeError("the disk never filled up")


def before_step(mount):
    def hook(step, _model):
        if step == FILL_AT:
            fill(mount)
    return hook


def with_monitor(mount, config_dir):
    from msprobe.pytorch.monitor import TrainerMon

    os.environ["MONITOR_OUTPUT_DIR"] = os.path.join(mount, "monitor_output")
    cfg = write_config(config_dir, wg_distribution=True, format="csv", ops=["norm", "max"], alert={"rules": []})
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    monitor = TrainerMon(cfg, params_have_main_grad=False).set_monitor(model, optimizer=optimizer)
    losses = train_mlp(model, optimizer, STEPS, before_step=before_step(mount))
    monitor.remove()
    import csv
    for step in range(FILL_AT):  # the files of the steps before the disk filled up, read back here: the tmpfs
        with open(os.path.join(monitor.run_dir, f"grad_reduced_{step}-{step}.csv"), newline="") as handle:
            rows = list(csv.reader(handle))  # goes with this process's mount namespace
        print(f"STEP{step}_ROWS", json.dumps([row[1] for row in rows[1:]]), flush=True)
    return losses


def with_grad_probe(mount, config_dir):
    from msprobe.pytorch import PrecisionDebugger

    config = os.path.join(config_dir, "config.json")
    with open(config, "w") as handle:
        json.dump({"task": "grad_probe", "dump_path": os.path.join(mount, "dump"),
                   "grad_probe": {"grad_level": "L2", "bounds": [-1, 0, 1]}}, handle)
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    debugger = PrecisionDebugger(config)
    debugger.monitor(model)
    losses = train_mlp(model, optimizer, STEPS, before_step=before_step(mount))
    debugger.stop()
    return losses


if __name__ == "__main__":
    tool, mount_point, config_folder = sys.argv[1:4]
    run = with_monitor if tool == "monitor" else with_grad_probe
    print("LOSSES", json.dumps(run(mount_point, config_folder)), flush=True)
    reference_model = mlp()
    print("REFERENCE", json.dumps(train_mlp(reference_model, torch.optim.SGD(reference_model.parameters(), lr=0.01),
                                            STEPS)), flush=True)
