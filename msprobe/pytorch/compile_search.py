"""compile_check's whole-graph check: compile the model whole, as the user does, and find the module at fault by search.

One eager run and one `torch.compile(model, backend)` run of the whole model (forward, and the backward of the
float32 sum of its outputs) give the departure: the largest relative error, in epsilons of its dtype, of an output
(each floating output) or of the parameter gradients (all together), `||compiled - eager|| / (eps * ||eager||)`,
over its allowance (`tolerance` epsilons, by default DEFAULT_EPS by the dtype's bits). Beyond 1, the module at
fault is found by delta debugging (core/bisect/search.py's find_culprits) over trials.
Dynamo traces the model once, as the user's compile does; each FX graph it hands over is kept, and a trial runs
it with a set of modules eager *inside* the compile: the graph is split into runs of nodes (torch.fx's
split_module), those of the eager modules (their nodes' `nn_module_stack`) as plain FX code, every other run
compiled by the user's backend on its own. The empty set is the user's compile, unchanged. A trial is good when
its departure is within 1. The search goes down the module tree: a smallest set of top-level modules whose eager
run clears the departure, then within each, a smallest set of its children, as deep as that holds. It stops at a module when

- it has no children, or running all its children eagerly does not clear it (the fault is in its own code); it
  is then compiled alone (every node outside it eager): if that clears the departure, the fault needs the code
  around it (an ancestor's own code, fused with it) and the nearest ancestor that departs compiled alone is
  named, fused across it; or
- one child's eager run clears it, and so does the eager run of the other children: the fault needs that child
  together with a sibling in one graph (a fusion across module boundaries); the module is named with the children
  whose eager run breaks the fusion (`fused_across`).

Splitting the traced graph (rather than `torch.compiler.disable` on the modules, which makes Dynamo trace again
around a graph break per trial: 18 s against 4 s for a 2-layer Llama on 2 CPU cores) costs one trace; each trial
recompiles only its compiled runs. Module paths come from the nodes' `nn_module_stack`, relative to the compiled
frame: where the model breaks its own graph, a graph traced from an inner frame names modules from that frame.
"""
import copy
import math
import re
import time
from typing import Any, Dict, FrozenSet, List, Optional, Tuple

import torch

from msprobe.core.bisect.search import Trials, find_culprits

__all__ = ["whole_graph_search", "floating_tensors", "stack_path", "allowance"]

#: the whole-graph allowance by default, in epsilons of a tensor's dtype, by its bits: a clean Inductor compile
#: of a 2-layer Llama departs 0.94 eps in float32 and 0.51 eps in bfloat16 (2-core CPU); the faults planted in
#: benchmarks/compile_faults.py depart from 10^2 to 10^6
DEFAULT_EPS = {16: 8.0, 32: 64.0, 64: 64.0}


def allowance(dtype, tolerance: Optional[float] = None) -> float:
    """The allowance of a tensor of `dtype`, in its epsilons: `tolerance`, or DEFAULT_EPS by the dtype's bits."""
    return float(tolerance) if tolerance is not None else DEFAULT_EPS.get(torch.finfo(dtype).bits, 8.0)


def floating_tensors(value) -> List[Any]:
    """The floating tensors of a (nested) output, in order (a transformers ModelOutput as its tuple)."""
    import torch

    if isinstance(value, torch.Tensor):
        return [value] if value.is_floating_point() else []
    if isinstance(value, dict):
        value = list(value.values())
    elif hasattr(value, "to_tuple"):  # transformers ModelOutput
        value = value.to_tuple()
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in floating_tensors(v)]
    return []


def _run(model, args, kwargs, backward, seed):
    """(floating outputs, parameter gradients) of one forward (and backward), detached."""
    torch.manual_seed(seed)
    outputs = floating_tensors(model(*args, **kwargs))
    grads = []
    if backward:
        parts = [t.float().sum() for t in outputs if t.requires_grad]
        if parts:
            sum(parts[1:], parts[0]).backward()
            grads = [p.grad.detach() for p in model.parameters() if p.grad is not None]
    return [t.detach() for t in outputs], grads


def _relative_error(compiled, eager) -> float:
    """||compiled - eager|| / (eps * ||eager||) over tensors of one dtype, in float64."""
    if not eager:
        return 0.0
    if len(compiled) != len(eager):
        return math.inf
    eps = torch.finfo(eager[0].dtype).eps
    diff = math.sqrt(sum(float(torch.sum((c.double() - e.double()) ** 2)) for c, e in zip(compiled, eager)))
    norm = math.sqrt(sum(float(torch.sum(e.double() ** 2)) for e in eager))
    if not math.isfinite(diff):
        return math.inf
    return diff / (eps * max(norm, 1e-30))


def _departure(compiled, eager, tolerance) -> Tuple[float, float]:
    """(the largest error over allowance, the largest error in epsilons) of outputs (each) and gradients (all)."""
    (outputs, grads), (eager_outputs, eager_grads) = compiled, eager
    if len(outputs) != len(eager_outputs):
        return math.inf, math.inf
    groups = [([c], [e]) for c, e in zip(outputs, eager_outputs)] + ([(grads, eager_grads)] if eager_grads else [])
    errors = [(_relative_error(c, e), allowance(e[0].dtype, tolerance)) for c, e in groups]
    return max([error / allowed for error, allowed in errors] or [0.0]), max([error for error, _ in errors] or [0.0])


_PREFIX = re.compile(r"^L\[[^\]]*\](\[\d+\])*\.?")


def stack_path(dynamo_path: str) -> str:
    """A Dynamo nn_module_stack path ("L['self'].model.layers[1]._modules['mlp']") as named_modules() writes it
    ("model.layers.1.mlp"), relative to the compiled frame's module, without `_orig_mod`."""
    path = _PREFIX.sub("", dynamo_path)
    path = re.sub(r"\._modules\['([^']*)'\]|\[['\"]?([^\]'\"]*)['\"]?\]", lambda m: "." + (m.group(1) or m.group(2)),
                  path)
    return ".".join(part for part in path.split(".") if part and part != "_orig_mod")


def _modules_of(node) -> FrozenSet[str]:
    return frozenset(stack_path(path) for path, _ in (node.meta.get("nn_module_stack") or {}).values())


#: a trial name "only:<path>" runs every node outside <path> eagerly: the module compiled alone
ONLY = "only:"


def _within(path: str, name: str) -> bool:
    return path == name or path.startswith(name + ".")


def _inside(node, eager: FrozenSet[str]) -> bool:
    """Whether the trial runs `node` eagerly: it is inside an eager module, or outside every `only:` module."""
    paths = _modules_of(node)
    alone = [name[len(ONLY):] for name in eager if name.startswith(ONLY)]
    if alone and not any(_within(path, name) for path in paths for name in alone):
        return True
    return any(_within(path, name) for path in paths for name in eager if not name.startswith(ONLY))


class _SplitBackend:
    """The backend of the search. Dynamo traces the model once; each graph it hands over is kept, and the callable
    returned runs it the current trial's way: whole through the user's backend (no module eager), or split into
    runs of nodes, those inside an eager module as plain FX code and the others each through the user's backend."""

    def __init__(self, backend):
        if isinstance(backend, str):
            from torch._dynamo.backends.registry import lookup_backend

            backend = lookup_backend(backend)
        self.backend = backend
        self.graphs: List[Any] = []
        self.eager: FrozenSet[str] = frozenset()
        self._compiled: Dict[Any, Any] = {}
        self._runs: Dict[Any, Any] = {}

    def __call__(self, graph_module, example_inputs):
        index = len(self.graphs)
        self.graphs.append((graph_module, list(example_inputs)))

        def run(*args):
            key = (index, self.eager)
            if key not in self._compiled:
                self._compiled[key] = self._compile(index)
            return self._compiled[key](*args)
        return run

    def _compile(self, index):
        from torch.fx.passes.split_module import split_module

        graph_module, example_inputs = self.graphs[index]
        nodes = [node for node in graph_module.graph.nodes if node.op not in ("placeholder", "output")]
        inside = {node: _inside(node, self.eager) for node in nodes}
        if not any(inside.values()):  # nothing eager: the graph whole, as the user compiles it
            return self.backend(copy.deepcopy(graph_module), example_inputs)
        runs, count = {}, 0
        for before, node in zip([None] + nodes, nodes):
            count += before is not None and inside[before] != inside[node]
            runs[node.name] = count
        eager_runs = {runs[node.name] for node in nodes if inside[node]}
        copied = copy.deepcopy(graph_module)
        split = split_module(copied, copied, lambda node: runs[node.name], keep_original_order=True)
        for name, child in list(split.named_children()):
            run = int(name.rpartition("_")[2])
            if run not in eager_runs:  # the same run of nodes in another trial is compiled once
                key = (index, tuple(node.name for node in nodes if runs[node.name] == run))
                if key not in self._runs:
                    self._runs[key] = _LazyCompiled(self.backend, child)
                setattr(split, name, self._runs[key])
        return split


class _LazyCompiled(torch.nn.Module):
    """A run of compiled nodes: handed to the backend at its first call (with that call's tensors as examples)."""

    def __init__(self, backend, graph_module):
        super().__init__()
        (output,) = [node for node in graph_module.graph.nodes if node.op == "output"]
        self.single = not isinstance(output.args[0], (tuple, list))
        if self.single:  # a backend takes graphs returning a tuple, as Dynamo's do
            output.args = ((output.args[0],),)
            graph_module.recompile()
        self.graph_module, self.backend, self.compiled = graph_module, backend, None

    def forward(self, *args):
        if self.compiled is None:
            self.compiled = self.backend(self.graph_module, list(args))
        out = self.compiled(*args)
        return out[0] if self.single else out


class _Trial:
    """Runs the model compiled whole (traced once), with the modules of each trial run eagerly inside the graph."""

    def __init__(self, model, backend, args, kwargs, backward, seed, tolerance):
        from msprobe.pytorch.dump.compiled import _ISOLATE_RECOMPILES

        self.args, self.kwargs, self.backward, self.seed = args, kwargs, backward, seed
        self.tolerance, self.eps = tolerance, {}
        self.eager = _run(copy.deepcopy(model), args, kwargs, backward, seed)
        self.model = copy.deepcopy(model)
        self.split = _SplitBackend(backend)
        self.compiled = torch.compile(self.model, backend=self.split, **_ISOLATE_RECOMPILES)

    def __call__(self, eager_modules: FrozenSet[str]) -> float:
        self.split.eager = frozenset(eager_modules)
        for param in self.model.parameters():
            param.grad = None
        result = _run(self.compiled, self.args, self.kwargs, self.backward, self.seed)
        departure, self.eps[self.split.eager] = _departure(result, self.eager, self.tolerance)
        return departure


def _children(model, path: str) -> List[str]:
    module = model.get_submodule(path) if path else model
    return [f"{path}.{name}" if path else name for name, _ in module.named_children()]


def _descend(trials: Trials, model, name: str, others: FrozenSet[str]) -> Dict[str, Any]:
    """The module at fault under `name`, given that running `name` (with `others`) eagerly clears the departure."""
    kids = _children(model, name)
    if not kids or not trials.good(others | frozenset(kids)):
        return _alone(trials, name)  # its own code
    found = find_culprits(trials, kids, others)
    if len(found) > 1:  # several children each needed: each is at fault, side by side
        return {"module": name, "fused_across": [], "parts": [_descend(trials, model, kid, others | frozenset(found)
                                                                        - {kid}) for kid in found]}
    rest = [kid for kid in kids if kid not in found]
    if rest and trials.good(others | frozenset(rest)):  # the fault needs found[0] and a sibling in one graph
        return {"module": name, "fused_across": found + find_culprits(trials, rest, others)}
    return _descend(trials, model, found[0], others)


def _alone(trials: Trials, name: str) -> Dict[str, Any]:
    """`name` at fault if, compiled alone (everything else eager), it still departs; otherwise the fault needs code
    around it in one graph (an ancestor's own code fused with it): the nearest ancestor that, compiled alone,
    departs, fused across `name`."""
    holder = name
    while holder and trials.good(frozenset([ONLY + holder])):
        holder = holder.rpartition(".")[0]
    return {"module": holder, "fused_across": [] if holder == name else [name]}


def _flatten(found: Dict[str, Any]) -> List[Dict[str, Any]]:
    if "parts" in found:
        return [leaf for part in found["parts"] for leaf in _flatten(part)]
    return [found]


def whole_graph_search(model, args, kwargs, backend, backward=True, seed=0,
                       tolerance: Optional[float] = None, limit: int = 256) -> Dict[str, Any]:
    """The whole-graph departure of `model` under `backend` and, beyond 1 (the largest error over its allowance:
    `tolerance` epsilons, or DEFAULT_EPS by dtype), the modules at fault: {"departure", "departure_eps",
    "tolerance", "departs", "graphs", "faulty_modules": [{"module", "fused_across"}], "trials": [{"modules",
    "metric", "good"}], "seconds"}."""
    started = time.perf_counter()
    run = _Trial(model, backend, args, kwargs, backward, seed, tolerance)
    trials = Trials(run=run, good_metric=lambda value: math.isfinite(value) and value <= 1.0, limit=limit)
    departure = trials.metric(frozenset())
    result: Dict[str, Any] = {"departure": departure, "departure_eps": run.eps[frozenset()],
                              "tolerance": "default" if tolerance is None else float(tolerance),
                              "departs": not trials.good(()), "graphs": len(run.split.graphs), "faulty_modules": []}
    if result["departs"] and result["graphs"]:
        top = _children(model, "")
        if not top or not trials.good(top):
            result["faulty_modules"] = [{"module": "", "fused_across": []}]  # the model's own forward
        else:
            culprits = find_culprits(trials, top)
            result["faulty_modules"] = [leaf for culprit in culprits for leaf in _flatten(
                _descend(trials, model, culprit, frozenset(culprits) - {culprit}))]
    result.update(trials=trials.log, seconds=round(time.perf_counter() - started, 3))
    return result
