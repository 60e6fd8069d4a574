"""op_generate: write a runnable `<api>.<forward|backward>.py` that reproduces one dumped API.

config_op.json (docs 23): dump_json_path, api_name ('Functional.softmax.0'), extract_api_path,
propagation ('forward' | 'backward'), data_mode ('random_data' | 'real_data'), random_seed, iter_times.
With dump_json_path + api_name the API's entries are first extracted into extract_api_path; without
them extract_api_path must already hold them.
"""
import json
import os
import re

from msprobe.core.errors import ConfigError, ParseError
from msprobe.core.log import logger
from msprobe.core.paths import atomic_write_json, atomic_write_text, check_path, load_json, make_dir

__all__ = ["load_op_config", "extract_api", "generate_script", "CALL_TEMPLATES"]

_DEFAULTS = {"dump_json_path": "", "api_name": "", "extract_api_path": "", "propagation": "forward",
             "data_mode": "random_data", "random_seed": 1234, "iter_times": 1}
_API_NAME = re.compile(r"^[A-Za-z]+\.[\w.]+\.\d+$")
CALL_TEMPLATES = {"Functional": "torch.nn.functional.{api}", "Torch": "torch.{api}", "Tensor": "torch.Tensor.{api}",
                  "Aten": "torch.ops.aten.{api}", "VF": "torch._VF.{api}"}

_SCRIPT = '''#!/usr/bin/env python
"""{api_name} {propagation}: single-API reproduction written by `msprobe -f pytorch op_generate`.

Runs the API on the device under test (CUDA when present, else the CPU) with the recorded dtypes and on
the CPU with floating inputs upcast (bfloat16/float16 -> float32, float32 -> float64), then prints the
precision standard's metrics and verdict for every {propagation} output. Data: {data_mode}.
Edit `api` below to try a fix; run with `python {file_name}`.
"""
import json
import sys

import torch

from msprobe.pytorch.api_accuracy_checker.single_api import reproduce

API_NAME = "{api_name}"
PROPAGATION = "{propagation}"
RANDOM_SEED = {random_seed}
ITER_TIMES = {iter_times}
TENSOR_DIR = {tensor_dir}  # real_data: the dumped tensors; None: random data from the statistics
FORWARD = json.loads(r"""{forward}""")
BACKWARD = json.loads(r"""{backward}""")


def api(*args, **kwargs):
    """The API under test."""
    return {call}(*args, **kwargs)


if __name__ == "__main__":
    verdict = reproduce(API_NAME, api, FORWARD, BACKWARD, PROPAGATION, TENSOR_DIR, RANDOM_SEED, ITER_TIMES)
    print(f"{{API_NAME}} {{PROPAGATION}}: {{verdict}}")
    sys.exit(0 if verdict != "error" else 1)
'''


def load_op_config(path):
    """config_op.json validated, with defaults filled in."""
    raw = load_json(path, what="-i config_op.json")
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: config_op.json must be a JSON object.")
    unknown = sorted(set(raw) - set(_DEFAULTS))
    if unknown:
        raise ConfigError(f"config_op.json: unknown key(s) {unknown}; known: {sorted(_DEFAULTS)}.")
    config = dict(_DEFAULTS, **raw)
    if config["propagation"] not in ("forward", "backward"):
        raise ConfigError(f"config_op.json: propagation must be 'forward' or 'backward', got {config['propagation']!r}.")
    if config["data_mode"] not in ("random_data", "real_data"):
        raise ConfigError(f"config_op.json: data_mode must be 'random_data' or 'real_data', got {config['data_mode']!r}.")
    for key in ("random_seed", "iter_times"):
        if isinstance(config[key], bool) or not isinstance(config[key], int) or config[key] < (1 if key == "iter_times" else 0):
            raise ConfigError(f"config_op.json: {key} must be a non-negative integer (iter_times >= 1).")
    if not config["extract_api_path"]:
        raise ConfigError("config_op.json: extract_api_path is required (where the API's entries are kept).")
    return config


def extract_api(dump_json_path, api_name, extract_path):
    """Copy `{api_name}.forward` / `.backward` of dump.json into extract_path; returns the dict written."""
    if not _API_NAME.match(api_name or ""):
        raise ConfigError(f"config_op.json: api_name must look like 'Functional.softmax.0', got {api_name!r}.")
    dump = load_json(dump_json_path, what="dump_json_path")
    data = dump.get("data", {}) if isinstance(dump, dict) else {}
    entries = {f"{api_name}.{d}": data[f"{api_name}.{d}"] for d in ("forward", "backward") if f"{api_name}.{d}" in data}
    if not entries:
        raise ConfigError(f"{api_name} is not in {dump_json_path}; use a name like 'Functional.softmax.0' from it.")
    extracted = {"task": dump.get("task"), "framework": dump.get("framework", "pytorch"),
                 "dump_json_path": os.path.abspath(dump_json_path), "data": entries}
    atomic_write_json(extract_path, extracted)
    return extracted


def _tensor_dir(extracted, data_mode):
    if data_mode != "real_data":
        return None
    if extracted.get("task") != "tensor":
        raise ConfigError("data_mode 'real_data' needs a dump made with task 'tensor'.")
    folder = os.path.join(os.path.dirname(extracted["dump_json_path"]), "dump_tensor_data")
    return check_path(folder, kind="dir", what="dump_tensor_data")


def generate_script(config, out_dir):
    """Write the reproduction script; returns its path."""
    if config["dump_json_path"] and config["api_name"]:
        extracted = extract_api(config["dump_json_path"], config["api_name"], config["extract_api_path"])
    else:
        extracted = load_json(config["extract_api_path"], what="extract_api_path")
    data = extracted.get("data") or {}
    forward_key = next((key for key in data if key.endswith(".forward")), None)
    if forward_key is None:
        raise ParseError(f"{config['extract_api_path']}: no '<api>.forward' entry to reproduce.")
    api_name = forward_key[: -len(".forward")]
    backward = data.get(f"{api_name}.backward")
    if config["propagation"] == "backward" and backward is None:
        raise ConfigError(f"{api_name} has no backward entry in the dump; use propagation 'forward'.")
    prefix, _, rest = api_name.partition(".")
    if prefix not in CALL_TEMPLATES:
        raise ConfigError(f"op_generate supports {sorted(CALL_TEMPLATES)} APIs, not '{prefix}'.")
    tensor_dir = _tensor_dir(extracted, config["data_mode"])
    file_name = f"{api_name}.{config['propagation']}.py"
    text = _SCRIPT.format(api_name=api_name, propagation=config["propagation"], data_mode=config["data_mode"],
                          file_name=file_name, random_seed=config["random_seed"], iter_times=config["iter_times"],
                          tensor_dir=repr(tensor_dir), forward=json.dumps(data[forward_key]),
                          backward=json.dumps(backward), call=CALL_TEMPLATES[prefix].format(api=rest.rsplit(".", 1)[0]))
    path = os.path.join(make_dir(out_dir, what="-o output directory"), file_name)
    atomic_write_text(path, text, mode=0o750)
    logger.info("op_generate: wrote %s", path)
    return path
