"""compile_check: where do a model's compiled numerics part from eager?

    from msprobe.pytorch import compile_check
    report = compile_check(model, example_inputs, backend="inductor", output_path="./compile_check_out")
    report["first_departure"]   # the first module (execution order) whose output departs while its inputs agree

Two copies of `model` (same weights) run one forward and backward on `example_inputs`: one eager, one
through `torch.compile(backend=...)`, both under an L0 statistics dump. The compiled copy is dumped as
dump/compiled.py describes: Dynamo breaks its graph at every module boundary, so every module's forward
(and its backward) runs compiled on its own, and its recorded output is the compiled one. The two dumps
pair by name and are compared with compare's dtype-aware tolerances; the advisor's first cause is the
first departing module. Written to `output_path`: dump_eager/, dump_compiled/, compare_result_*.xlsx,
advisor_*.txt, compile_check_result.json (modules ranked by departure) and, for the suspect, repro/
(a standalone script with its inputs, see compile_repro.py) and with `dump_graphs` its FX graphs.
"""
import copy
import os

from msprobe.core.compile_report import RESULT_FILE, judge, write_report
from msprobe.core.errors import MsprobeError
from msprobe.core.log import logger
from msprobe.core.paths import make_dir

__all__ = ["compile_check", "CompileCheckError", "RESULT_FILE"]


class CompileCheckError(MsprobeError):
    """compile_check could not run the model."""


def _split_inputs(example_inputs):
    if isinstance(example_inputs, dict):
        return (), dict(example_inputs)
    if isinstance(example_inputs, (list, tuple)):
        return tuple(example_inputs), {}
    return (example_inputs,), {}


def _float_sum(value):
    """Sum of every floating tensor in a (nested) output, in float32: the scalar the backward starts from."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.float().sum() if value.is_floating_point() and value.requires_grad else None
    if isinstance(value, dict):
        value = list(value.values())
    elif hasattr(value, "to_tuple"):  # transformers ModelOutput
        value = value.to_tuple()
    if isinstance(value, (list, tuple)):
        parts = [p for p in (_float_sum(v) for v in value) if p is not None]
        return sum(parts[1:], parts[0]) if parts else None
    return None


def _dump_run(model, args, kwargs, dump_path, backward, seed):
    """One forward (and backward) of `model` under an L0 statistics dump; the dump.json path."""
    import torch

    from msprobe.core.debugger_base import DebuggerBase
    from msprobe.pytorch.debugger import PrecisionDebugger

    # the user's own debugger (if any) is set aside, not closed, and is the active one again afterwards
    previous, DebuggerBase._active = DebuggerBase._active, None
    debugger = PrecisionDebugger(task="statistics", level="L0", dump_path=dump_path, model=model)
    try:
        torch.manual_seed(seed)
        debugger.start()
        output = model(*args, **kwargs)
        loss = _float_sum(output) if backward else None
        if loss is not None:
            loss.backward()
        debugger.stop()
        debugger.close()
    finally:
        DebuggerBase._active = previous
    path = os.path.join(dump_path, "step0", "rank", "dump.json")
    if not os.path.isfile(path):
        raise CompileCheckError(f"compile_check: the model recorded no module under {dump_path} (does it have "
                                "submodules?).")
    return path


def compile_check(model, example_inputs, backend="inductor", output_path="./compile_check_output",
                  dump_graphs=False, backward=True, seed=0):
    """Compare `model` eager against `torch.compile(model, backend=backend)` module by module; returns
    the report (also written as compile_check_result.json). `example_inputs`: a tensor, a tuple of
    positional arguments or a dict of keyword arguments."""
    import torch

    output_path = make_dir(output_path, what="output_path")
    args, kwargs = _split_inputs(example_inputs)
    eager_model, compiled_source = copy.deepcopy(model), copy.deepcopy(model)
    eager_json = _dump_run(eager_model, args, kwargs, os.path.join(output_path, "dump_eager"), backward, seed)
    graphs = None
    if dump_graphs:
        from msprobe.pytorch.compile_graphs import GraphRecorder

        graphs = GraphRecorder(backend, compiled_source)
        backend = graphs
    compiled = torch.compile(compiled_source, backend=backend)
    compiled_json = _dump_run(compiled, args, kwargs, os.path.join(output_path, "dump_compiled"), backward, seed)
    report, phase = judge(compiled_json, eager_json, output_path)
    report = {"backend": str(getattr(backend, "compiler_name", backend)), **report}
    first = report["first_departure"]
    if first is not None:
        if first["module"] is not None and phase == "forward":
            from msprobe.pytorch.compile_repro import write_repro

            report["repro"] = write_repro(model, first["module"], args, kwargs,
                                          backend if graphs is None else graphs.backend,
                                          os.path.join(output_path, "repro"), seed)
        if graphs is not None and first["module"] is not None:
            report["graphs"] = graphs.write_for(first["module"], os.path.join(output_path, "graphs"))
    write_report(report, output_path)
    logger.info(f"compile_check: first departing call: {first['call']} ({first['kind']})" if first else
                "compile_check: no module departs beyond tolerance.")
    return report

