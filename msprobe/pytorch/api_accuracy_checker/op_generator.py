"""op_generate: write a runnable `<api>.<forward|backward>.py` that reproduces one dumped API.

config_op.json (docs 23): dump_json_path, api_name ('Functional.softmax.0'), extract_api_path,
propagation ('forward' | 'backward'), data_mode ('random_data' | 'real_data'), random_seed, iter_times.
With dump_json_path + api_name the API's entries are first extracted into extract_api_path; without
them extract_api_path must already hold them. The API must be one the dump wraps (the allow-list of
msprobe.core.api_resolver): the script's call is written only for those.
"""
import json
import os

from msprobe.core.errors import ConfigError, ParseError, PathError
from msprobe.core.log import logger
from msprobe.core.naming import check_api_name
from msprobe.core.paths import atomic_write_json, atomic_write_text, check_path, load_json, make_dir

__all__ = ["load_op_config", "extract_api", "generate_script", "CALL_TEMPLATES"]

_DEFAULTS = {"dump_json_path": "", "api_name": "", "extract_api_path": "", "propagation": "forward",
             "data_mode": "random_data", "random_seed": 1234, "iter_times": 1}
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

API_NAME = {api_literal}
PROPAGATION = {propagation_literal}
RANDOM_SEED = {random_seed}
ITER_TIMES = {iter_times}
TENSOR_DIR = {tensor_dir}  # real_data: the dumped tensors; None: random data from the statistics
FORWARD = json.loads({forward})
BACKWARD = json.loads({backward})


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
    for key in ("dump_json_path", "api_name", "extract_api_path", "propagation", "data_mode"):
        if not isinstance(config[key], str):
            raise ConfigError(f"config_op.json: {key} must be a string, got {type(config[key]).__name__}.")
    if config["propagation"] not in ("forward", "backward"):
        raise ConfigError(f"config_op.json: propagation must be 'forward' or 'backward', got {config['propagation']!r}.")
    if config["data_mode"] not in ("random_data", "real_data"):
        raise ConfigError(f"config_op.json: data_mode must be 'random_data' or 'real_data', got {config['data_mode']!r}.")
    for key, (low, high) in (("random_seed", (0, 2 ** 32 - 1)), ("iter_times", (1, 10_000))):
        if isinstance(config[key], bool) or not isinstance(config[key], int) or not low <= config[key] <= high:
            raise ConfigError(f"config_op.json: {key} must be an integer from {low} to {high}.")
    if not config["extract_api_path"]:
        raise ConfigError("config_op.json: extract_api_path is required (where the API's entries are kept).")
    return config


def extract_api(dump_json_path, api_name, extract_path):
    """Copy `{api_name}.forward` / `.backward` of dump.json into extract_path; returns the dict written."""
    api_name = check_api_name(api_name, what="config_op.json: api_name").call_name
    dump = load_json(dump_json_path, what="dump_json_path")
    data = dump.get("data") if isinstance(dump, dict) else None
    if not isinstance(data, dict):
        raise ParseError(f"dump_json_path '{dump_json_path}': no 'data' object; expected a dump.json written by msprobe.")
    entries = {f"{api_name}.{d}": data[f"{api_name}.{d}"] for d in ("forward", "backward") if f"{api_name}.{d}" in data}
    if not entries:
        raise ConfigError(f"{api_name} is not in {dump_json_path}; use a name like 'Functional.softmax.0' from it.")
    extracted = {"task": dump.get("task"), "framework": dump.get("framework", "pytorch"),
                 "dump_json_path": os.path.abspath(dump_json_path), "data": entries}
    extract_path = check_path(extract_path, kind="file", must_exist=False, writable=True, what="extract_api_path")
    try:
        atomic_write_json(extract_path, extracted)
    except OSError as exc:
        raise PathError(f"extract_api_path: cannot write '{extract_path}': {exc.strerror or exc}.") from None
    return extracted


def _tensor_dir(extracted, data_mode):
    if data_mode != "real_data":
        return None
    if extracted.get("task") != "tensor":
        raise ConfigError("data_mode 'real_data' needs a dump made with task 'tensor'.")
    dump_json = extracted.get("dump_json_path")
    if not isinstance(dump_json, str) or not dump_json:
        raise ParseError("extract_api_path: 'dump_json_path' (where the tensor files are) is missing or not a string.")
    folder = os.path.join(os.path.dirname(dump_json), "dump_tensor_data")
    return check_path(folder, kind="dir", what="dump_tensor_data")


def _forward_entry(extracted, source):
    """(validated call name, forward record, backward record or None) of an extracted API file."""
    data = extracted.get("data") if isinstance(extracted, dict) else None
    if not isinstance(data, dict):
        raise ParseError(f"{source}: no 'data' object; expected the file op_generate extracts from a dump.json.")
    forward_key = next((key for key in data if isinstance(key, str) and key.endswith(".forward")), None)
    if forward_key is None:
        raise ParseError(f"{source}: no '<api>.forward' entry to reproduce.")
    # the key comes from a file and becomes code and a file name: only the API-name grammar passes
    entry = check_api_name(forward_key, what=f"{source}: entry")
    backward = data.get(str(entry.with_direction("backward")))
    forward = data[forward_key]
    if not isinstance(forward, dict) or (backward is not None and not isinstance(backward, dict)):
        raise ParseError(f"{source}: the entries of {entry.call_name} must be JSON objects as in dump.json.")
    return entry, forward, backward


def _check_callable(entry):
    """Refuse (one line) a name the generated script could not call through the API allow-list: the code
    `torch.{api}` is written only for an API the dump wraps (never `Torch.os.system`)."""
    if entry.prefix not in CALL_TEMPLATES:
        raise ConfigError(f"op_generate supports {sorted(CALL_TEMPLATES)} APIs, not '{entry.prefix}'.")
    from msprobe.core.api_resolver import resolve
    from msprobe.pytorch.dump.api_names import api_allow_list

    resolve(api_allow_list(), entry.prefix, entry.api, warn=False)


def generate_script(config, out_dir):
    """Write the reproduction script; returns its path."""
    if config["dump_json_path"] and config["api_name"]:
        _check_callable(check_api_name(config["api_name"], what="config_op.json: api_name"))
        extracted = extract_api(config["dump_json_path"], config["api_name"], config["extract_api_path"])
    else:
        extracted = load_json(config["extract_api_path"], what="extract_api_path")
    entry, forward, backward = _forward_entry(extracted, f"extract_api_path '{config['extract_api_path']}'")
    api_name = entry.call_name
    if config["propagation"] == "backward" and backward is None:
        raise ConfigError(f"{api_name} has no backward entry in the dump; use propagation 'forward'.")
    _check_callable(entry)
    tensor_dir = _tensor_dir(extracted, config["data_mode"])
    file_name = f"{api_name}.{config['propagation']}.py"
    # names passed the grammar and the allow-list; data goes in as Python literals of JSON text
    text = _SCRIPT.format(api_name=api_name, api_literal=repr(api_name), propagation=config["propagation"],
                          propagation_literal=repr(config["propagation"]), data_mode=config["data_mode"],
                          file_name=file_name, random_seed=int(config["random_seed"]),
                          iter_times=int(config["iter_times"]), tensor_dir=repr(tensor_dir),
                          forward=repr(json.dumps(forward)), backward=repr(json.dumps(backward)),
                          call=CALL_TEMPLATES[entry.prefix].format(api=entry.api))
    path = os.path.join(make_dir(out_dir, what="-o output directory"), file_name)
    try:
        atomic_write_text(path, text, mode=0o750)
    except OSError as exc:
        raise PathError(f"op_generate: cannot write '{path}': {exc.strerror or exc}.") from None
    logger.info("op_generate: wrote %s", path)
    return path
