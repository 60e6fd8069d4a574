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
from msprobe.core.errors import CompareError
from msprobe.core.naming import EntryName
from msprobe.core.run_ut.arg_template import tensor_file_path
from msprobe.pytorch.api_accuracy_checker.arguments import build_call_args, build_grads, flatten_tensors
from msprobe.pytorch.api_accuracy_checker.executor import call_api, run_backward
from msprobe.pytorch.api_accuracy_checker.op_resolver import is_inplace, resolve_api
from msprobe.pytorch.dump.adapter import TorchAdapter

__all__ = ["rerun_origin", "TorchCallRunner"]


class TorchCallRunner:
    """Runs one recorded PyTorch API call on its saved inputs, on `device`: the forward without autograd, or
    forward and backward from the saved output gradients (as run_ut does)."""

    def __init__(self, device="cpu"):
        self.device = device
        self.adapter = TorchAdapter()

    def resolve(self, prefix, api):
        return resolve_api(prefix, api)

    def saved_fingerprint(self, tensor_dir, descriptor):
        path = tensor_file_path(tensor_dir, descriptor["data_name"])
        return self.adapter.fingerprint(torch.load(path, map_location="cpu", weights_only=True))

    def run_once(self, function, record, call, tensor_dir, backward_record=None):
        with_grad = backward_record is not None
        with torch.set_grad_enabled(with_grad):
            inputs = build_call_args(record, call, tensor_dir, self.device, with_grad=with_grad)
            outputs = flatten_tensors(call_api(function, inputs, is_inplace(EntryName.parse(call).api)))
        if not with_grad:
            return self.adapter.fingerprints_now([t for t in outputs if isinstance(t, torch.Tensor)])
        grads = build_grads(backward_record, call, outputs, tensor_dir)
        pairs = [(o, g) for o, g in zip(outputs, grads)
                 if g is not None and isinstance(o, torch.Tensor) and o.requires_grad]
        if not pairs:
            raise CompareError(f"{call[:120]}: no saved output gradient reaches a differentiable output.")
        run_backward([o for o, _ in pairs], [g for _, g in pairs])
        return self.adapter.fingerprints_now([leaf.grad for leaf in inputs.leaves if leaf.grad is not None])



def rerun_origin(tensor_dump_json, call, bench_dump_json, k=5, device="cpu"):
    """Re-execute `call` (the forward or backward entry of an API call) k times on the tensor dump's saved
    inputs, on `device` ("cuda:0" to re-run where a GPU run ran); returns core/compare/rerun.py's verdict plus
    "call"."""
    return rerun.rerun_origin(tensor_dump_json, call, bench_dump_json, TorchCallRunner(device), k)
