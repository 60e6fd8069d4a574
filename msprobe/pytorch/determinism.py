"""Re-run the origin call of a first divergence in this process, k times, on the inputs a tensor dump saved.

    from msprobe.pytorch.determinism import rerun_origin
    verdict = rerun_origin("run_b_tensors/step0/rank/dump.json", "Functional.silu.1.forward",
                           "run_a/step0/rank/dump.json", k=5)
    verdict["class"]   # "non-deterministic kernel" | "deterministic, different result" | "reproduces the good run"

The PyTorch `CallRunner` of core/compare/rerun.py, which reads the dumps and judges: inputs are read from
the `data_name` files of the tensor dump (weights_only loads, plain file names inside its dump_tensor_data),
the API is found only through the allow-list of the APIs the dump wraps (core/api_resolver.py), outputs are
fingerprinted as summary_mode "xor" does.
"""
import torch

from msprobe.core.compare import rerun
from msprobe.core.run_ut.arg_template import tensor_file_path
from msprobe.pytorch.api_accuracy_checker.arguments import build_call_args, flatten_tensors
from msprobe.pytorch.api_accuracy_checker.op_resolver import resolve_api
from msprobe.pytorch.dump.adapter import TorchAdapter

__all__ = ["rerun_origin", "TorchCallRunner"]


class TorchCallRunner:
    """Runs one recorded PyTorch API call on its saved inputs, on `device`, without autograd."""

    def __init__(self, device="cpu"):
        self.device = device
        self.adapter = TorchAdapter()

    def resolve(self, prefix, api):
        return resolve_api(prefix, api)

    def saved_fingerprint(self, tensor_dir, descriptor):
        path = tensor_file_path(tensor_dir, descriptor["data_name"])
        return self.adapter.fingerprint(torch.load(path, map_location="cpu", weights_only=True))

    def run_once(self, function, record, call, tensor_dir):
        with torch.no_grad():
            inputs = build_call_args(record, call, tensor_dir, self.device, with_grad=False)
            out = function(*inputs.args, **inputs.kwargs)
        return [self.adapter.fingerprint(t) for t in flatten_tensors(out) if isinstance(t, torch.Tensor)]


def rerun_origin(tensor_dump_json, call, bench_dump_json, k=5, device="cpu"):
    """Re-execute `call` (a forward API entry) k times on the tensor dump's saved inputs; returns
    core/compare/rerun.py's verdict plus "call"."""
    return rerun.rerun_origin(tensor_dump_json, call, bench_dump_json, TorchCallRunner(device), k)
