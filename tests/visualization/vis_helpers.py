"""Real PyTorch dumps for the graph tests: a stack of Linear+ReLU blocks trained one SGD step under
PrecisionDebugger, optionally with one block's weight scaled (the injected fault)."""
import glob
import json
import os

import torch
import torch.nn as nn

from msprobe.cli import main
from msprobe.pytorch import PrecisionDebugger


class Blocks(nn.Module):
    """embed -> blocks[0..n-1] (Linear, ReLU) -> head."""

    def __init__(self, n_blocks=4, width=8):
        super().__init__()
        self.embed = nn.Linear(4, width)
        self.blocks = nn.Sequential(*[nn.Sequential(nn.Linear(width, width), nn.ReLU()) for _ in range(n_blocks)])
        self.head = nn.Linear(width, 2)

    def forward(self, x):
        return self.head(self.blocks(self.embed(x)))


def make_model(seed=0, n_blocks=4, fault_block=None, scale=8.0, cls=Blocks):
    torch.manual_seed(seed)
    model = cls(n_blocks) if cls is Blocks else cls()
    if fault_block is not None:
        with torch.no_grad():
            model.blocks[fault_block][0].weight.mul_(scale)
    return model


def dump(directory, model, task="statistics", level="mix", summary_mode=None, steps=1, micro_batches=1,
         rank=None, optimizer=True, extra_input=None):
    """Train `steps` steps of `model` under the debugger; returns the dump root (holding step*/)."""
    os.makedirs(directory, exist_ok=True)
    config = {"task": task, "dump_path": os.path.join(directory, "dump"), "level": level,
              task: {"summary_mode": summary_mode} if summary_mode else {}}
    config_path = os.path.join(directory, "config.json")
    with open(config_path, "w") as handle:
        json.dump(config, handle)
    debugger = PrecisionDebugger(config_path=config_path, model=model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(123)
    for _ in range(steps):
        debugger.start()
        for _ in range(micro_batches):
            x = torch.randn(3, 4, generator=gen)
            if extra_input is not None:
                x = extra_input(x)
            loss = model(x).pow(2).mean()
            loss.backward()
        if optimizer:
            opt.step()
            opt.zero_grad()
        debugger.stop()
        debugger.step()
    debugger.close()
    return os.path.join(directory, "dump")


def rank_dir(root, step=0):
    return os.path.join(root, f"step{step}", "rank")


def run_graph_cli(tmp_path, npu, bench=None, *flags, framework="pytorch", name="out"):
    """`msprobe -f FW graph`; returns (exit code, list of written .vis paths)."""
    content = {"npu_path": str(npu), "is_print_compare_log": True}
    if bench is not None:
        content["bench_path"] = str(bench)
    input_json = os.path.join(str(tmp_path), f"{name}.json")
    with open(input_json, "w") as handle:
        json.dump(content, handle)
    out = os.path.join(str(tmp_path), name)
    code = main(["-f", framework, "graph", "-i", input_json, "-o", out, *flags])
    return code, sorted(glob.glob(os.path.join(out, "*.vis")))


def load_vis(path):
    with open(path) as handle:
        return json.load(handle)


def advisor_suspect(npu_dir, bench_dir):
    """The row `msprobe compare`'s advisor names for two dump directories (None: no suspect), computed
    by the compare flow alone (no graph code)."""
    from msprobe.core.compare import CompareOptions, compare_tables
    from msprobe.core.io.load import load_dump

    records = compare_tables(load_dump(os.path.join(npu_dir, "dump.json")),
                             load_dump(os.path.join(bench_dir, "dump.json")), CompareOptions(progress=False))
    return records.suspect.name if records.suspect is not None else None


def node_of_row(vis, row_name):
    """The NPU node of a compare `.vis` whose input or output data hold the row `row_name`."""
    found = [node_id for node_id, node in vis["NPU"]["node"].items()
             if row_name in node["input_data"] or row_name in node["output_data"]]
    assert len(found) == 1, found
    return found[0]


def precision_indices(vis, collections=False):
    """{node id: precision index} of the matched NPU nodes (API collections only if asked)."""
    return {k: v["data"]["precision_index"] for k, v in vis["NPU"]["node"].items()
            if "precision_index" in v["data"] and (collections or v["node_type"] != 9)}
