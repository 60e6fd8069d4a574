"""PyTorch callbacks of the online run_ut bench: offline run_ut's `TorchOps`, with tensors from messages.

Inputs and output gradients come from the received blobs instead of dump_tensor_data/ files; everything
else (which tensors get gradients, the bench copy, forward, backward, comparison) is offline run_ut's, so
a received call gives the rows a tensor dump of it gives. Besides, the outputs and input gradients the
device computed during training are compared with the same bench (`device_rows`), for the
`_device` CSVs and api_precision_compare.
"""
import torch

from msprobe.core.errors import UnsupportedError
from msprobe.core.naming import is_tensor_descriptor
from msprobe.core.precision.output_check import SKIP, aggregate_status
from msprobe.core.run_ut.arg_template import fill, template_of
from msprobe.core.run_ut.executor import SideRun, executor_factory
from msprobe.core.run_ut.random_data import rng_for
from msprobe.core.run_ut.runner import keep_freed_memory
from msprobe.pytorch.api_accuracy_checker import arguments
from msprobe.pytorch.api_accuracy_checker.arguments import CallArgs, bench_copy, flatten_tensors, torch_dtype
from msprobe.pytorch.api_accuracy_checker.executor import TorchOps, _compare, device_for
from msprobe.pytorch.online_run_ut.packing import unpack_tensor

__all__ = ["OnlineTorchOps", "make_online_runner", "MAX_GENERATED_ONLINE"]

MAX_GENERATED_ONLINE = 1 << 24  # elements drawn for a tensor that did not come with its call


def _check_generated_size(case, record):
    """A tensor that did not travel is drawn from its recorded shape: a peer's few header bytes must not
    ask for gigabytes (offline run_ut, reading your own dump, allows 2^30 elements)."""
    shape, elements = record.get("shape"), 1
    for size in shape if isinstance(shape, list) else []:
        elements *= size if isinstance(size, int) and size > 0 else 1
        if elements > MAX_GENERATED_ONLINE:
            raise UnsupportedError(f"a tensor of {case.name} without data arrived with shape {str(shape)[:60]}: "
                                   f"more than {MAX_GENERATED_ONLINE} elements are not generated online")


def _received(case, record, rng, device):
    """The tensor of a descriptor: its blob (a new tensor per use, as each dumped file is loaded anew),
    else, like offline run_ut, values drawn from the recorded statistics."""
    name = record.get("data_name")
    if not name:
        _check_generated_size(case, record)
        return arguments._make_tensor(record, rng, None, device)
    if name not in case.blobs:
        raise UnsupportedError(f"tensor {str(name)[:80]} did not arrive with the call")
    meta, view = case.blobs[name]
    try:
        tensor = unpack_tensor(meta, view)
    except ValueError as exc:
        raise UnsupportedError(str(exc)) from None
    return tensor.to(torch_dtype(record.get("dtype", meta["dtype"]))).to(device)


def _values_of(case, node, device):
    """Flattened values of a received output/gradient structure (tensors and numbers, None dropped)."""
    template = template_of({"input_args": list(node or [])})
    rng = rng_for(f"{case.name}.device")
    tensors = [_received(case, record, rng, device) for record in template.tensors]
    return flatten_tensors(fill(template.args, tensors, lambda record: arguments._scalar(record, device)))


class OnlineTorchOps(TorchOps):
    """TorchOps whose tensors come from the received blobs; collects `device_rows` for each case. A
    received call may make tensors of the online cap only (or of its largest received tensor)."""

    size_cap = MAX_GENERATED_ONLINE

    def __init__(self):
        super().__init__()
        self.device_rows = []

    def build_inputs(self, case, settings):
        device = settings.get("device", "cpu")
        with_grad = case.backward is not None
        template = template_of(case.forward)
        rng = rng_for(f"{case.name}.forward")
        tensors, leaves = [], []
        for record in template.tensors:  # argument order, as offline run_ut builds them
            tensor = _received(case, record, rng, device)
            if with_grad and tensor.is_floating_point() and record.get("requires_grad", True) is not False:
                tensor.requires_grad_(True)
                leaves.append(tensor)
            tensors.append(tensor)

        def scalar(record):
            return arguments._scalar(record, device)
        call = CallArgs(fill(template.args, tensors, scalar), fill(template.kwargs, tensors, scalar), leaves)
        return SideRun(call), SideRun(bench_copy(call)), with_grad

    def backward(self, case, settings, tested, bench):
        # offline run_ut's TorchOps.backward with the output gradients taken from the blobs
        records = list((case.backward or {}).get("input") or [])
        rng = rng_for(f"{case.name}.backward")
        grads = []
        for position, output in enumerate(tested.outputs):
            record = records[position] if position < len(records) else None
            if not isinstance(output, torch.Tensor) or not is_tensor_descriptor(record):
                grads.append(None)
                continue
            grad = _received(case, record, rng, output.device)
            grads.append(grad.to(output.dtype).reshape(output.shape) if grad.numel() == output.numel() else None)
        return self.backward_with(grads, tested, bench)

    def compare(self, prefix, tested, bench, tested_side, bench_side):
        rows = super().compare(prefix, tested, bench, tested_side, bench_side)
        case = self.case
        if prefix.endswith(".forward.output"):
            received = _values_of(case, case.forward.get("output"), "cpu")
        else:
            received = _values_of(case, (case.backward or {}).get("output"), "cpu")
            if len(received) != len([g for g in bench if g is not None]):
                return rows  # the device's input gradients do not line up with the re-run's leaves
            bench = [g for g in bench if g is not None]
        autocast = tested_side.state if isinstance(tested_side.state, torch.dtype) else None
        self.device_rows.extend(_compare(prefix, received, bench, autocast))
        return rows

    def resolve(self, case):
        self.case = case
        return super().resolve(case)


def _device_outcome(case, outcome, rows, failing):
    forward = [row for row in rows if ".forward." in row["name"]]
    backward = [row for row in rows if ".backward." in row["name"]]
    backward_status = aggregate_status([r["status"] for r in backward]) if backward else outcome["backward"]
    reasons = [f"{r['name']}: {r['message']}" for r in rows if r["status"] in failing and r.get("message")]
    return {"api": case.name, "forward": aggregate_status([r["status"] for r in forward]) or SKIP,
            "backward": backward_status, "message": "; ".join(reasons), "details": rows}


def make_online_runner(settings):
    """run(case) -> (outcome of the re-run, outcome of the device's own outputs), both against the bench.
    One thread and glibc keeping freed memory, as offline run_ut runs: the same numbers, the same speed."""
    torch.set_num_threads(int(settings.get("threads") or 1))
    keep_freed_memory()
    settings = dict(settings, device=settings.get("device") or device_for(settings.get("device_id", 0)))
    ops = OnlineTorchOps()
    execute = executor_factory(ops, settings)

    def run(case):
        ops.device_rows = []
        outcome = execute(case)
        if not ops.device_rows and outcome["forward"] == SKIP:
            return outcome, outcome
        return outcome, _device_outcome(case, outcome, ops.device_rows, ops.failing_statuses)
    return run
