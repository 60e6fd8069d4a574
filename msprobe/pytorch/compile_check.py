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
import json
import os

from msprobe.core.errors import MsprobeError
from msprobe.core.log import logger
from msprobe.core.paths import make_dir

__all__ = ["compile_check", "CompileCheckError", "RESULT_FILE"]

RESULT_FILE = "compile_check_result.json"


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


def _ranking(records):
    """[{module, departure}] per call, largest departure first: the worst score / allowance of its rows."""
    import numpy as np

    judgement = records.judgement
    if judgement is None:
        return []
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(judgement.allowed > 0, judgement.scores / judgement.allowed, np.nan)
    worst = {}
    for row, entry in enumerate(records.entries):
        values = ratio[row]
        if not np.isfinite(values).any():
            continue
        value = float(np.nanmax(np.where(np.isfinite(values), values, np.nan)))
        worst[entry] = max(worst.get(entry, 0.0), value)
    ranked = sorted(worst.items(), key=lambda item: -item[1])
    return [{"call": entry, "departure": round(value, 3), "beyond_tolerance": value > 1.0,
             "parameters_grad": entry.endswith("parameters_grad")} for entry, value in ranked]


def _module_path(entry):
    """'Module.encoder.layer.0.Foo.forward.0' -> 'encoder.layer.0'."""
    parts = entry.split(".")
    for marker in ("forward", "backward", "parameters_grad"):
        if marker in parts:
            return ".".join(parts[1:parts.index(marker) - 1])
    return None


def compile_check(model, example_inputs, backend="inductor", output_path="./compile_check_output",
                  dump_graphs=False, backward=True, seed=0):
    """Compare `model` eager against `torch.compile(model, backend=backend)` module by module; returns
    the report (also written as compile_check_result.json). `example_inputs`: a tensor, a tuple of
    positional arguments or a dict of keyword arguments."""
    import torch

    from msprobe.core.compare.runner import CompareOptions, compare_pair

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
    outcome = compare_pair(compiled_json, eager_json, output_path, CompareOptions(progress=False))
    records = outcome.records
    suspect = _find_suspect(records)
    parameter_gradients = []
    if suspect is not None and suspect.phase not in ("forward", "backward"):
        # parameter gradients are reductions over the batch that Inductor orders its own way: their rows
        # stay in the report and the ranking, but a module departs by its forward or backward outputs
        parameter_gradients.append(suspect.summary or suspect.entry)
        suspect = None
    report = {"backend": str(getattr(backend, "compiler_name", backend)), "eager_dump": eager_json,
              "compiled_dump": compiled_json, "compare_result": outcome.xlsx_path,
              "advisor": outcome.advisor_path, "ranking": _ranking(records), "first_departure": None,
              "parameter_gradient_departures": parameter_gradients}
    if suspect is not None:
        report["first_departure"] = {"call": suspect.entry, "module": _module_path(suspect.entry),
                                     "phase": suspect.phase, "kind": suspect.kind, "summary": suspect.summary}
        module_path = report["first_departure"]["module"]
        if module_path is not None and suspect.phase == "forward":
            from msprobe.pytorch.compile_repro import write_repro

            report["repro"] = write_repro(model, module_path, args, kwargs, backend if graphs is None else graphs.backend,
                                          os.path.join(output_path, "repro"), seed)
        if graphs is not None and module_path is not None:
            report["graphs"] = graphs.write_for(module_path, os.path.join(output_path, "graphs"))
    with open(os.path.join(output_path, RESULT_FILE), "w", encoding="utf-8") as handle:
        json.dump(report, handle, indent=2)
    first = report["first_departure"]
    logger.info(f"compile_check: first departing call: {first['call']} ({first['kind']})" if first else
                "compile_check: no module departs beyond tolerance.")
    return report


def _find_suspect(records):
    from msprobe.core.compare.advisor import find_suspect

    return find_suspect(records)
