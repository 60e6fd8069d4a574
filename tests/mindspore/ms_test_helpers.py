"""Helpers for the MindSpore tests: config files, dump loading, fixed inputs."""
import json
import os
import shlex
import sys

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


def msrun_command(*msrun_args):
    """msrun started by this interpreter, not by the `msrun` or `python` first on PATH."""
    return [sys.executable, "-c", "import sys; from mindspore.parallel.cluster.run import main; sys.exit(main())",
            *msrun_args]


def env_with_this_python(directory, env=None):
    """`env` whose PATH starts with a folder where `python` is this interpreter: msrun starts every
    worker as `python SCRIPT`, looked up on PATH."""
    bin_dir = os.path.join(str(directory), "this_python_bin")
    os.makedirs(bin_dir, exist_ok=True)
    launcher = os.path.join(bin_dir, "python")
    if not os.path.lexists(launcher):
        # a script, not a symlink: Python finds a virtual environment from the folder of the path it was started
        # by, so a link elsewhere to a venv's python starts the base interpreter without the venv's packages
        with open(launcher, "w", encoding="utf-8") as handle:
            handle.write(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} \"$@\"\n")
        os.chmod(launcher, 0o755)
    env = dict(os.environ if env is None else env)
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
    return env


def diagnosis_nets():
    """benchmarks/diagnosis_mindspore.py loaded by path (its nets, faults and scoring: the tests check the
    benchmark's own pairs)."""
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "benchmarks",
                        "diagnosis_mindspore.py")
    spec = importlib.util.spec_from_file_location("diagnosis_mindspore", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
