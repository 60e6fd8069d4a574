"""The run_ut flow of one API, written once: the frameworks give callbacks (`FrameworkOps`).

    inputs of both sides -> forward on the tested side and on the bench -> compare outputs
    -> backward on both (when the dump recorded one) -> compare input gradients
    -> save the data of a failing API -> outcome dict (see `msprobe.core.run_ut.report.ResultWriter.write`)

A framework module implements `FrameworkOps` and builds its executor factory with `make_executor`::

    def make_executor(settings):
        return executor_factory(TorchOps(), settings)
"""
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Protocol, Sequence, Tuple, cast

from msprobe.core.errors import UnsupportedError
from msprobe.core.naming import BACKWARD, FORWARD, entry_of_call, is_api_name, tensor_file_name
from msprobe.core.precision.output_check import SKIP, aggregate_status
from msprobe.core.run_ut.runner import run_or_skip

__all__ = ["FrameworkOps", "SideRun", "run_case", "executor_factory", "save_error_arrays"]


@dataclass
class SideRun:
    """One side (tested or bench) of one API: its inputs, flattened outputs and input gradients.
    `state` holds what the framework needs between forward and backward (leaves, a vjp function)."""
    inputs: Any
    outputs: List[Any] = field(default_factory=list)
    grads: Optional[List[Any]] = None
    state: Any = None


class FrameworkOps(Protocol):
    """Callbacks of one framework. `failing_statuses`: row statuses that fail an API (named in its
    message, and its data saved with -save_error_data); `empty_forward_status`: the forward status of
    an API without output rows."""

    failing_statuses: Tuple[str, ...]
    empty_forward_status: str

    def resolve(self, case) -> Callable[..., Any]:
        """The API under test."""

    def build_inputs(self, case, settings: Dict[str, Any]) -> Tuple[SideRun, SideRun, bool]:
        """(tested side, bench side, whether a backward is checked), inputs filled in."""

    def forward(self, case, function: Callable[..., Any], side: SideRun, with_grad: bool, is_bench: bool) -> None:
        """Run the forward of one side: fill `side.outputs` (flattened) and `side.state`."""

    def backward(self, case, settings: Dict[str, Any], tested: SideRun, bench: SideRun) -> str:
        """Fill both sides' `grads` from the recorded output gradients; '' or the reason it cannot run."""

    def compare(self, prefix: str, tested: Sequence[Any], bench: Sequence[Any],
                tested_side: SideRun, bench_side: SideRun) -> List[Dict[str, Any]]:
        """Detail rows `{prefix}.{i}` comparing tested values with bench values."""

    def save_error_data(self, folder: str, case, tested: SideRun, bench: SideRun) -> None:
        """Write the inputs and both outputs of a failing API under `folder`."""


def run_case(case, settings: Dict[str, Any], ops: FrameworkOps) -> Dict[str, Any]:
    """Outcome dict of one ApiCase: forward and backward verdicts, message, detail rows."""
    function = ops.resolve(case)
    if not is_api_name(case.name):  # it becomes file names (-save_error_data): ASCII grammar, '٣' is no index
        raise UnsupportedError(f"{ascii(case.name)[1:81]} is refused: not an API name of ASCII letters, digits, "
                               "'_' and dots; nothing was run")
    tested, bench, with_grad = ops.build_inputs(case, settings)
    ops.forward(case, function, tested, with_grad, is_bench=False)
    ops.forward(case, function, bench, with_grad, is_bench=True)
    forward_rows = ops.compare(f"{entry_of_call(case.name, FORWARD)}.output", tested.outputs, bench.outputs, tested,
                               bench)
    backward_rows, backward_status, message = [], "", ""
    if with_grad:
        reason = ops.backward(case, settings, tested, bench)
        if reason:
            backward_status, message = SKIP, f"backward: {reason}"
        else:
            # ops.backward filled both gradient lists
            backward_rows = ops.compare(f"{entry_of_call(case.name, BACKWARD)}.output",
                                        cast(List[Any], tested.grads), cast(List[Any], bench.grads), tested, bench)
            backward_status = aggregate_status([r["status"] for r in backward_rows])
    forward_status = aggregate_status([r["status"] for r in forward_rows]) or ops.empty_forward_status
    failing = ops.failing_statuses
    reasons = [f"{r['name']}: {r['message']}" for r in forward_rows + backward_rows
               if r["status"] in failing and r.get("message")]
    if settings.get("error_data_dir") and (forward_status in failing or backward_status in failing):
        ops.save_error_data(settings["error_data_dir"], case, tested, bench)
    return {"api": case.name, "forward": forward_status, "backward": backward_status,
            "message": "; ".join([m for m in [message] + reasons if m]), "details": forward_rows + backward_rows}


def executor_factory(ops: FrameworkOps, settings: Dict[str, Any]) -> Callable[[Any], Dict[str, Any]]:
    """execute(case) -> outcome; an API that cannot run here becomes SKIP rows (see run_or_skip)."""
    def run_with_ops(case, case_settings):
        return run_case(case, case_settings, ops)

    def execute(case):
        return run_or_skip(run_with_ops, case, settings)
    return execute


def save_error_arrays(folder: str, case_name: str, groups: Dict[str, Sequence[Any]], extension: str,
                      save: Callable[[Any, str], Optional[bool]]) -> None:
    """`{case_name}.forward.{group}.{index}.{extension}` for every value of every group that `save`
    accepts (it returns False to skip one); folders 0750, files 0640."""
    os.makedirs(folder, mode=0o750, exist_ok=True)
    for group, values in groups.items():
        for index, value in enumerate(values):
            path = os.path.join(folder, tensor_file_name(entry_of_call(case_name, FORWARD), group, index,
                                                         suffix=f".{extension}"))
            if save(value, path) is not False:
                os.chmod(path, 0o640)
