"""Helpers of the dump-core tests: a real torch dump driven through the collector, and checks of its files."""
import json
import os

import torch

from msprobe.core.config import load_config
from msprobe.core.dump import DumpCollector
from msprobe.pytorch.dump.adapter import TorchAdapter


def make_collector(dump_path, task="tensor", adapter=None, **overrides):
    config = load_config(None, framework="pytorch", task=task, dump_path=str(dump_path), level="L1", **overrides)
    return DumpCollector(config, adapter or TorchAdapter())


def api_call(collector, key, function, *args):
    """Run `function(*args)` as an API hook does: begin_forward, the call, end_forward."""
    call = collector.begin_forward(key, args, {})
    output = function(*args)
    replaced = collector.end_forward(call, output)
    return output if replaced is None else replaced


def dumped_step(collector, x, weight):
    """One step of linear -> relu (relu's input is linear's output: one file, hard-linked)."""
    collector.start()
    hidden = api_call(collector, "Functional.linear", torch.nn.functional.linear, x, weight)
    out = api_call(collector, "Functional.relu", torch.relu, hidden)
    collector.stop()
    return out


def load_dump(rank_dir):
    with open(os.path.join(rank_dir, "dump.json"), encoding="utf-8") as handle:
        return json.load(handle)


def tensor_descriptors(node):
    """Every tensor descriptor (a dict with "dtype" and "shape") inside a dump.json entry."""
    if isinstance(node, dict):
        if "dtype" in node and "shape" in node:
            yield node
        else:
            for value in node.values():
                yield from tensor_descriptors(value)
    elif isinstance(node, list):
        for value in node:
            yield from tensor_descriptors(value)


def check_tensor_files(rank_dir):
    """Every data_name of dump.json loads (weights_only) and has the statistics dump.json gives; returns the
    set of file names dump.json names."""
    dump = load_dump(rank_dir)
    named = set()
    for entry in dump["data"].values():
        for desc in tensor_descriptors(entry):
            name = desc.get("data_name")
            if name is None:
                continue
            named.add(name)
            tensor = torch.load(os.path.join(rank_dir, "dump_tensor_data", name), weights_only=True)
            assert list(tensor.shape) == desc["shape"], name
            assert tensor.float().max().item() == desc["Max"], name
            assert tensor.float().min().item() == desc["Min"], name
    return named
