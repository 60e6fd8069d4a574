"""compile_check for MindSpore: where do a network's `mindspore.jit` (graph) numerics part from PyNative?

    from msprobe.mindspore.compile_check import compile_check
    report = compile_check(net, example_inputs, output_path="./compile_check_out")
    report["first_departure"]   # the first cell (execution order) whose jit output departs from PyNative

One PyNative forward of `net` records every sub-cell's first call: its inputs and outputs. Then each
cell runs again on its own, on those same inputs, through `jit(cell)` (default `mindspore.jit` of its
construct, compiled to a graph) and, with `backward`, both ways through `mindspore.grad` of the float32
sum of its outputs (gradients of its tensor inputs and its own parameters). The PyNative and the jit
results are written as two statistics dumps (Cell.{path}.{Class}.forward/backward.0,
.parameters_grad), in completion order (a cell after the cells it calls), and judged by the shared
core/compile_report.py, as the PyTorch compile_check does. What this cannot see is said in
docs/compile.md ("MindSpore").
"""
import os

from msprobe.core.compile_report import judge, tensor_descriptor, write_dump, write_report
from msprobe.core.errors import MsprobeError
from msprobe.core.log import logger
from msprobe.core.paths import make_dir

__all__ = ["compile_check", "CompileCheckError", "graph_jit"]

_TYPE = "mindspore.Tensor"


class CompileCheckError(MsprobeError):
    """compile_check could not run the network."""


def graph_jit(cell):
    """The default compiler: the cell's construct through mindspore.jit (a graph)."""
    import mindspore as ms

    return ms.jit(cell.construct)


def _tensors(value):
    """The floating tensors of a (nested) output, in order."""
    import mindspore as ms

    if isinstance(value, ms.Tensor):
        return [value] if value.is_floating_point() else []
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    return []


def _describe(values):
    import mindspore as ms

    return [tensor_descriptor(_TYPE, str(v.dtype), v.astype(ms.float32).asnumpy()) if isinstance(v, ms.Tensor)
            and v.is_floating_point() else None for v in values]


def _capture(net, args):
    """[(path, cell, inputs, output)] of every sub-cell's first call in one PyNative forward, in the order
    the calls complete."""
    calls, handles, seen = [], [], set()
    for path, cell in net.cells_and_names():
        if not path:
            continue  # the network itself is no entry, as in the L0 dump

        def post(cell, inputs, output, path=path):
            if path not in seen:
                seen.add(path)
                calls.append((path, cell, tuple(inputs), output))
        handles.append(cell.register_forward_hook(post))
    try:
        net(*args)
    finally:
        for handle in handles:
            handle.remove()
    return calls


def _grads(forward, cell, inputs):
    """Gradients of the float32 sum of forward(*inputs)'s outputs: (input grads, own parameter grads)."""
    import mindspore as ms

    positions = tuple(i for i, v in enumerate(inputs) if isinstance(v, ms.Tensor) and v.is_floating_point())
    params = [p for p in cell.get_parameters(expand=False) if p.requires_grad]
    if not positions and not params:
        return [], {}

    def loss(*call_inputs):
        parts = [t.astype(ms.float32).sum() for t in _tensors(forward(*call_inputs))]
        return sum(parts[1:], parts[0])

    result = ms.grad(loss, grad_position=positions or None, weights=params or None)(*inputs)
    input_grads, param_grads = (result if positions and params else
                                (result, ()) if positions else ((), result))
    input_grads = [input_grads] if isinstance(input_grads, ms.Tensor) else list(input_grads)
    names = [p.name.rpartition(".")[2] for p in params]
    return input_grads, dict(zip(names, param_grads))


def _entries(path, cell, inputs, forward, output, backward):
    """The dump entries of one cell run one way (PyNative or jit)."""
    key = f"Cell.{path}.{type(cell).__name__}"
    entries = [(f"{key}.forward.0", {"input_args": _describe(inputs), "input_kwargs": {},
                                     "output": _describe(_tensors(output))})]
    if backward:
        input_grads, param_grads = _grads(forward, cell, inputs)
        if input_grads:
            entries.append((f"{key}.backward.0", {"input": [], "output": _describe(input_grads)}))
        if param_grads:
            entries.append((f"{key}.parameters_grad",
                            {name: _describe([grad])[0] for name, grad in param_grads.items()}))
    return entries


def _own(cell):
    """Whether the cell's class is the user's (not one of MindSpore's own cells)."""
    module = type(cell).__module__ or ""
    return not (module == "mindspore" or module.startswith("mindspore."))


def _check_compiled_some(calls, not_compiled):
    """A check that compiled nothing of the network's own code fails, in one line: no cell ran under jit,
    or none of the user's own cells did (only MindSpore's built-in cells compiled)."""
    failed = {row["cell"] for row in not_compiled}
    own = [path for path, cell, _, _ in calls if _own(cell)]
    if len(failed) == len(calls) or (own and failed.issuperset(own)):
        which = "no sub-cell" if len(failed) == len(calls) else "none of the network's own cells"
        raise CompileCheckError(f"compile_check compiled nothing: {which} ran under jit ({len(failed)} of "
                                f"{len(calls)} cells failed; '{not_compiled[0]['cell']}': "
                                f"{not_compiled[0]['error']}).")


def compile_check(net, example_inputs, output_path="./compile_check_output", jit=graph_jit, backward=True,
                  seed=0):
    """Compare each sub-cell of `net` in PyNative against `jit(cell)` on the same inputs; returns the
    report (also written as compile_check_result.json). `example_inputs`: a Tensor or a tuple of them.
    `jit(cell)` returns the compiled callable (default: mindspore.jit of the cell's construct)."""
    import mindspore as ms

    if ms.get_context("mode") != ms.PYNATIVE_MODE:
        raise CompileCheckError("compile_check: run it in PyNative mode (the reference side is PyNative).")
    output_path = make_dir(output_path, what="output_path")
    args = tuple(example_inputs) if isinstance(example_inputs, (list, tuple)) else (example_inputs,)
    ms.set_seed(seed)
    calls = _capture(net, args)
    if not calls:
        raise CompileCheckError("compile_check: the network called no sub-cell.")
    eager, compiled, not_compiled = [], [], []
    for path, cell, inputs, output in calls:
        ms.set_seed(seed)
        try:
            jitted = jit(cell)
            compiled_entries = _entries(path, cell, inputs, jitted, jitted(*inputs), backward)
        except Exception as exc:  # noqa: BLE001  a cell jit cannot compile: left out, the others still checked
            reason = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
            not_compiled.append({"cell": path, "class": type(cell).__name__, "error": reason})
            logger.warning(f"compile_check: cell '{path}' ({type(cell).__name__}) did not run under jit: {reason}")
            continue
        eager += _entries(path, cell, inputs, cell, output, backward)
        compiled += compiled_entries
    _check_compiled_some(calls, not_compiled)
    eager_json = write_dump(os.path.join(output_path, "dump_eager"), "mindspore", eager)
    compiled_json = write_dump(os.path.join(output_path, "dump_compiled"), "mindspore", compiled)
    report, _ = judge(compiled_json, eager_json, output_path)
    report = {"compiler": getattr(jit, "__name__", str(jit)), **report, "not_compiled": not_compiled}
    write_report(report, output_path)
    first = report["first_departure"]
    logger.info(f"compile_check: first departing call: {first['call']} ({first['kind']})" if first else
                "compile_check: no cell departs beyond tolerance.")
    return report
