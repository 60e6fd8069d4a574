"""Re-run the origin call of a first divergence in this process (PyNative), k times, on the inputs a tensor
dump saved.

    from msprobe.mindspore.determinism import rerun_origin
    verdict = rerun_origin("run_b_tensors/step0/rank/dump.json", "Mint.matmul.1.forward",
                           "run_a/step0/rank/dump.json", k=5)
    verdict["class"]   # "non-deterministic kernel" | "deterministic, different result" | "reproduces the good run"

The MindSpore `CallRunner` of core/compare/rerun.py, which reads the dumps and judges: inputs are the
tensor dump's `.npy` files (read without pickle, plain file names inside its dump_tensor_data), rebuilt in
the recorded dtypes as MindSpore run_ut rebuilds them; the API is found only through the allow-list of the
APIs the dump wraps (core/api_resolver.py); outputs are fingerprinted as summary_mode "xor" does.
"""
from msprobe.core.api_resolver import resolve
from msprobe.core.compare import rerun
from msprobe.core.errors import UnsupportedError
from msprobe.core.naming import is_random_api
from msprobe.mindspore.api_accuracy_checker.api_map import resolve_mindspore
from msprobe.mindspore.api_accuracy_checker.executor import call_arguments, call_input_grads, saved_tensor
from msprobe.mindspore.dump.adapter import get_adapter

__all__ = ["rerun_origin", "MindSporeCallRunner"]


def _tensors(value, tensor_type):
    if isinstance(value, tensor_type):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _tensors(item, tensor_type)]
    return []


class MindSporeCallRunner:
    """Runs one recorded MindSpore API call (mint, ops, Tensor methods, supported primitives) on its saved
    inputs, in PyNative mode on the current device: the forward, or forward and backward (ms.vjp) from the
    saved output gradients."""

    def __init__(self):
        import mindspore

        self.tensor_type = mindspore.Tensor
        self.adapter = get_adapter()

    def resolve(self, prefix, api):
        if is_random_api(api):
            raise UnsupportedError("random API: its difference is the RNG audit's (class random), not a kernel's")
        if prefix == "Distributed":
            raise UnsupportedError("communication API: needs a process group, it cannot be re-run alone")
        if prefix == "Primitive":
            return resolve_mindspore(prefix, api)
        from msprobe.mindspore.dump.api_registry import api_allow_list

        return resolve(api_allow_list(), prefix, api)

    def saved_fingerprint(self, tensor_dir, descriptor):
        return self.adapter.fingerprint(saved_tensor(tensor_dir, descriptor))

    def run_once(self, function, record, call, tensor_dir, backward_record=None):
        if backward_record is not None:
            grads = call_input_grads(function, record, backward_record, call, tensor_dir)
            return [self.adapter.fingerprint(g) for g in grads]
        args, kwargs = call_arguments(record, call, tensor_dir)  # new tensors: in-place calls start afresh
        return [self.adapter.fingerprint(t) for t in _tensors(function(*args, **kwargs), self.tensor_type)]


def rerun_origin(tensor_dump_json, call, bench_dump_json, k=5):
    """Re-execute `call` (the forward or backward entry of an API call) k times on the tensor dump's saved
    inputs; returns core/compare/rerun.py's verdict plus "call"."""
    return rerun.rerun_origin(tensor_dump_json, call, bench_dump_json, MindSporeCallRunner(), k)
