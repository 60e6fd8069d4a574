"""compile_check: where do a model's compiled numerics part from eager?

    from msprobe.pytorch import compile_check
    report = compile_check(model, example_inputs, backend="inductor", output_path="./compile_check_out")
    report["first_departure"]   # the first module (execution order) whose output departs while its inputs agree

First the model is compiled whole, as the user compiles it (compile_search.py): its outputs and parameter
gradients are compared with an eager run's, and beyond `tolerance` (epsilons of each tensor's dtype) the module
at fault is found by delta debugging, running sets of modules eagerly inside the whole-graph compile, down the
module tree: report["whole_graph"] ({"departure", "departs", "faulty_modules", "trials", ...}) and
report["faulty_module"] (the first of them, or None). A compile in which Dynamo handed the backend no graph
compiled nothing: that is an error, not a pass.

Then (unless `module_by_module=False`) two copies of `model` (same weights) run one forward and backward on
`example_inputs`: one eager, one through `torch.compile(backend=...)`, both under an L0 statistics dump. The
compiled copy is dumped as dump/compiled.py describes: Dynamo breaks its graph at every module boundary, so
every module's forward (and its backward) runs compiled on its own, and its recorded output is the compiled
one. That is another program than the user's (no fusion across modules), but it names a module whose own
compile departs even where the whole graph's departure stays within tolerance. The two dumps pair by name and
are compared with compare's dtype-aware tolerances; the advisor's first cause is the first departing module.
Written to `output_path`: dump_eager/, dump_compiled/, compare_result_*.xlsx, advisor_*.txt,
compile_check_result.json (modules ranked by departure) and, for the suspect, repro/ (a standalone script
with its inputs, see compile_repro.py) and with `dump_graphs` its FX graphs.
"""
import copy
import os

from msprobe.core.compile_report import RESULT_FILE, judge, whole_graph_line, write_report
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


def _dump_run(model, args, kwargs, dump_path, backward, seed):
    """One forward (and backward) of `model` under an L0 statistics dump; the dump.json path."""
    import torch

    from msprobe.core.debugger_base import DebuggerBase
    from msprobe.pytorch.compile_search import floating_tensors
    from msprobe.pytorch.debugger import PrecisionDebugger

    # the user's own debugger (if any) is set aside, not closed, and is the active one again afterwards
    previous, DebuggerBase._active = DebuggerBase._active, None
    debugger = PrecisionDebugger(task="statistics", level="L0", dump_path=dump_path, model=model)
    try:
        torch.manual_seed(seed)
        debugger.start()
        output = model(*args, **kwargs)
        parts = [t.float().sum() for t in floating_tensors(output) if t.requires_grad] if backward else []
        if parts:
            sum(parts[1:], parts[0]).backward()
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
                  dump_graphs=False, backward=True, seed=0, tolerance=None, module_by_module=True, whole_graph=True):
    """Compare `model` eager against `torch.compile(model, backend=backend)`, compiled whole (the module at
    fault found by search) and module by module; returns the report (also written as
    compile_check_result.json). `example_inputs`: a tensor, a tuple of positional arguments or a dict of
    keyword arguments. `tolerance`: the whole graph's allowance in epsilons (default: 64 for 32-bit tensors, 8
    for 16-bit). `whole_graph` / `module_by_module`: run that half (at least one)."""
    output_path = make_dir(output_path, what="output_path")
    args, kwargs = _split_inputs(example_inputs)
    if not (whole_graph or module_by_module):
        raise CompileCheckError("compile_check: whole_graph and module_by_module are both off: nothing to check.")
    whole = _whole_graph(model, args, kwargs, backend, backward, seed, tolerance) if whole_graph else None
    faulty = whole["faulty_modules"][0]["module"] if whole and whole["faulty_modules"] else None
    report = {"backend": _backend_name(backend), "whole_graph": whole, "faulty_module": faulty}
    if module_by_module:
        report.update(_module_by_module(model, args, kwargs, backend, output_path, dump_graphs, backward, seed))
    else:
        report["first_departure"] = None
    write_report(report, output_path)
    return report


def _backend_name(backend):
    return str(getattr(backend, "compiler_name", None) or getattr(backend, "__name__", None) or backend)


def _whole_graph(model, args, kwargs, backend, backward, seed, tolerance):
    from msprobe.pytorch.compile_search import whole_graph_search

    try:
        whole = whole_graph_search(model, args, kwargs, backend, backward=backward, seed=seed, tolerance=tolerance)
    except RuntimeError as exc:  # the trial limit
        raise CompileCheckError(f"compile_check: the search for the faulty module stopped: {exc}.") from None
    if not whole["graphs"]:
        raise CompileCheckError("compile_check compiled nothing: Dynamo handed the backend no graph (the model ran "
                                "eagerly; is its forward disabled for Dynamo or are its inputs no tensors?).")
    logger.info(f"compile_check: {whole_graph_line(whole)}")
    return whole


def _module_by_module(model, args, kwargs, backend, output_path, dump_graphs, backward, seed):
    """The L0 dumps of an eager and a module-by-module compiled copy, judged; the report's entries."""
    import torch

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
    first = report["first_departure"]
    if first is not None:
        if first["module"] is not None and phase == "forward":
            from msprobe.pytorch.compile_repro import write_repro

            report["repro"] = write_repro(model, first["module"], args, kwargs,
                                          backend if graphs is None else graphs.backend,
                                          os.path.join(output_path, "repro"), seed)
        if graphs is not None and first["module"] is not None:
            report["graphs"] = graphs.write_for(first["module"], os.path.join(output_path, "graphs"))
    logger.info(f"compile_check, module by module: first departing call: {first['call']} ({first['kind']})"
                if first else "compile_check, module by module: no module departs beyond tolerance.")
    return report

