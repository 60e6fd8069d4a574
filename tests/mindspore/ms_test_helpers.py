"""Helpers for the MindSpore tests: config files, dump loading, fixed inputs."""
import json
import os

import numpy as np


def write_config(directory, **config):
    """config.json with dump_path inside `directory`; returns (config path, dump path)."""
    dump_path = os.path.join(str(directory), "dump")
    config.setdefault("dump_path", dump_path)
    path = os.path.join(str(directory), "config.json")
    with open(path, "w") as handle:
        json.dump(config, handle)
    return path, config["dump_path"]


def load_dump(dump_path, step=0, rank=""):
    """(dump.json, stack.json, construct.json) of one step."""
    base = os.path.join(dump_path, f"step{step}", f"rank{rank}")
    out = []
    for name in ("dump.json", "stack.json", "construct.json"):
        with open(os.path.join(base, name)) as handle:
            out.append(json.load(handle))
    return out


def fixed_input(shape=(2, 4), seed=0):
    return np.random.RandomState(seed).randn(*shape).astype(np.float32)
