"""Re-run the origin call of a first divergence in this process, k times, on the inputs a tensor dump saved.

    from msprobe.pytorch.determinism import rerun_origin
    verdict = rerun_origin("run_b_tensors/step0/rank/dump.json", "Functional.silu.1.forward",
                           "run_a/step0/rank/dump.json", k=5)
    verdict["class"]   # "non-deterministic kernel" | "deterministic, different result" | "reproduces the good run"

The inputs are read from the `data_name` files of the tensor dump (weights_only loads, plain file names
inside its dump_tensor_data); the API is found only through the allow-list of the APIs the dump wraps
(core/api_resolver.py); outputs are fingerprinted as summary_mode "xor" does; the judgement is
core/compare/rerun.py's. The good run's fingerprints come from its xor dump (the same call's outputs).
"""
import json
import os

import torch

from msprobe.core.compare.rerun import classify_reruns
from msprobe.core.errors import CompareError
from msprobe.core.naming import EntryName
from msprobe.core.paths import check_path
from msprobe.core.run_ut.arg_template import tensor_file_path
from msprobe.pytorch.api_accuracy_checker.arguments import build_call_args
from msprobe.pytorch.api_accuracy_checker.op_resolver import resolve_api
from msprobe.pytorch.dump.adapter import TorchAdapter

__all__ = ["rerun_origin"]


def _outputs(value):
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _outputs(item)]
    return []


def _descriptor_prints(node, key):
    """Fingerprints (`key`) of the tensor descriptors under node, in order."""
    if isinstance(node, list):
        return [p for item in node for p in _descriptor_prints(item, key)]
    if isinstance(node, dict):
        if "type" in node:
            return [node[key]] if key in node else []
        return [p for item in node.values() for p in _descriptor_prints(item, key)]
    return []


def _load(path, what):
    path = check_path(path, kind="file", what=what, allow_symlink=True)
    with open(path, encoding="utf-8") as handle:
        return path, json.load(handle)


def rerun_origin(tensor_dump_json, call, bench_dump_json, k=5, device="cpu"):
    """Re-execute `call` (a forward API entry) k times on the tensor dump's saved inputs; returns
    classify_reruns' verdict plus "call"."""
    path, dump = _load(tensor_dump_json, "tensor dump")
    _, bench = _load(bench_dump_json, "bench dump")
    record, bench_record = dump.get("data", {}).get(call), bench.get("data", {}).get(call)
    if record is None or bench_record is None:
        raise CompareError(f"call {call[:120]!r} is not in both dumps.")
    name = EntryName.parse(call)
    if name is None or name.is_module or name.direction != "forward":
        raise CompareError(f"{call[:120]!r} is not a forward API call; only those can be re-run.")
    function = resolve_api(name.prefix, name.api)
    tensor_dir = os.path.join(os.path.dirname(path), "dump_tensor_data")
    adapter = TorchAdapter()
    observed = [adapter.fingerprint(torch.load(tensor_file_path(tensor_dir, d["data_name"]), weights_only=True))
                for d in _flat_descriptors(record.get("output"))]
    reruns = []
    with torch.no_grad():
        for _ in range(k):
            inputs = build_call_args(record, call, tensor_dir, device, with_grad=False)  # fresh: in-place safe
            out = function(*inputs.args, **inputs.kwargs)
            reruns.append([adapter.fingerprint(t) for t in _outputs(out)])
    verdict = classify_reruns(reruns, _descriptor_prints(bench_record.get("output"), "xor"), observed)
    return {"call": call, **verdict}


def _flat_descriptors(node):
    if isinstance(node, list):
        return [d for item in node for d in _flat_descriptors(item)]
    if isinstance(node, dict) and node.get("data_name"):
        return [node]
    return []
