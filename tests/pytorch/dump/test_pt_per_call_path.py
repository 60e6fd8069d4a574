"""The per-call path: RecordBuilder.describe_tensor against statistics recomputed by torch over a zoo of tensors
(views, strided, 16-bit, 0-d, complex, in-place changes, reused memory), keyword arguments of any mapping type, the
grad walk's hooks, failing backward entries and the removal of every hook."""
import contextlib
import enum
import json

import numpy as np
import pytest
import torch
from torch.utils.hooks import RemovableHandle

from hf_models import tiny_llama, train_lm
from msprobe.core.dump.record import RecordBuilder
from msprobe.pytorch import PrecisionDebugger
from msprobe.pytorch.dump import grad_tracker
from msprobe.pytorch.dump.api_hooks import _NoSubclassDispatch
from msprobe.pytorch.dump.adapter import TorchAdapter
from pt_dump_helpers import write_config



class Color(enum.IntEnum):
    RED = 1


def _values():
    torch.manual_seed(0)
    base = torch.randn(4, 6)
    return [
        base, base.t(), base[:, 1:3], torch.tensor(2.5), torch.arange(6), torch.tensor([True, False]),
        torch.randn(3, requires_grad=True), torch.nn.Parameter(torch.randn(2, 2)), torch.zeros(0),
        3, -7, 2.5, float("nan"), True, False, "mean", None, Color.RED, np.float64(1.5), np.int64(4),
        slice(1, None, 2), slice(0.5, "a", True), slice(torch.tensor(1), 3), [slice(None), Ellipsis], Ellipsis,
        [{"a": 1}, (), [[None]]], torch.float16, torch.device("cpu"), torch.Size([2, 3]),
        [base, 1, None, [2.0, "x"]], (base, (base.t(),)), {"dim": 1, "t": base, 3: "int key"},
        torch.max(base, dim=1), object(),
    ]


def _builder(mode="statistics", describer=True):
    builder = RecordBuilder(TorchAdapter(), mode)
    if not describer and "describe_tensor" in vars(builder):  # the Python describe_tensor, as without the kernels
        del builder.describe_tensor
    return builder


def _same(left, right):
    """Equal descriptors, NaN equal to NaN, and the same container types (tuples stay tuples)."""
    if type(left) is not type(right):
        return False
    if isinstance(left, dict):
        return list(left) == list(right) and all(_same(left[k], right[k]) for k in left)
    if isinstance(left, (list, tuple)):
        return len(left) == len(right) and all(_same(a, b) for a, b in zip(left, right))
    if isinstance(left, float) and left != left:
        return right != right
    return left == right


def _tensor_zoo():
    """Tensors the C descriptor describes itself and tensors it hands to the Python path, in an order that meets the
    statistics cache's cases: a first sight, the same memory again (a new tensor object of the same storage), a
    change in place (a new version), memory freed and allocated again."""
    torch.manual_seed(1)
    base = torch.randn(64, 70)
    special = torch.randn(5000)
    special[7], special[99], special[4000] = float("nan"), float("inf"), -0.0
    zoo = [base, base.view(70, 64), base.reshape(-1), special, torch.randn(4097, dtype=torch.float64),
           torch.randn(33, 3).half(), torch.randn(300, 17).bfloat16(), torch.randn(3, requires_grad=True),
           torch.nn.Parameter(torch.randn(2, 2)), torch.ones(70000), torch.tensor(2.5), torch.zeros(0),
           torch.arange(6), torch.tensor([True, False]), base.t(), base[:, 1:3], torch.randn(4, 4, dtype=torch.complex64),
           torch.randn(4, 4, dtype=torch.complex64).conj(), torch._neg_view(torch.randn(5)), torch.randn(3).expand(4, 3)]
    # strided views, described in C too: a permuted 3-d memory met first through its views (its own bytes'
    # fingerprint unknown until the memory itself comes), a slice with a step, a broadcast with a size-1 dimension,
    # 0-d tensors of each float kind, a transpose of a float16 memory
    cube = torch.randn(3, 5, 7)
    zoo += [cube.permute(2, 0, 1), cube.transpose(0, 1), cube, cube[:, ::2, 1:], torch.randn(1, 6).expand(3, 1, 6)[:, :, ::3],
            torch.tensor(-1.5, dtype=torch.float64), torch.tensor(0.25, dtype=torch.bfloat16),
            torch.tensor(float("nan")), torch.randn(9, 4).half().t(), torch.randn(4, 1, 3).transpose(0, 2)]
    with torch.inference_mode():
        zoo.append(torch.randn(6))
    return zoo


def _cache_view(builder):
    """The statistics cache with each weakref replaced by whether it is alive and its target's id."""
    return {key: (None if entry[0] is None else id(entry[0]()),) + tuple(entry[1:])
            for key, entry in builder._stats_cache.items()}


@pytest.mark.parametrize("mode", ["statistics", "xor"])
def test_describe_tensor_gives_torchs_statistics_over_the_zoo_and_its_cache(mode):
    from msprobe.core.dump.stats import fingerprint

    builder = RecordBuilder(TorchAdapter(), mode)
    zoo = _tensor_zoo()
    for round_ in range(2):  # the second round meets every tensor in the cache
        for tensor in zoo:
            desc = builder.describe_tensor(tensor)
            assert desc["type"] == "torch.Tensor" and desc["shape"] == tuple(tensor.shape), round_
            assert desc["requires_grad"] is tensor.requires_grad
            if not tensor.numel() or not tensor.is_floating_point():
                continue
            values = tensor.detach().resolve_neg().double()
            if values.numel() == 1:  # as the reference writes one element: its value for all four
                assert {repr(desc[key]) for key in ("Max", "Min", "Mean", "Norm")} == {repr(values.item())}
                continue
            if torch.isnan(values).any():
                assert desc["Max"] != desc["Max"]
                continue
            assert (desc["Max"], desc["Min"]) == (values.max().item(), values.min().item()), (round_, tensor.dtype)
            assert desc["Mean"] == pytest.approx(values.mean().item(), rel=1e-5, abs=1e-6)
            assert desc["Norm"] == pytest.approx(torch.linalg.vector_norm(values).item(), rel=1e-5, abs=1e-6)
            if mode == "xor":
                raw = tensor.detach().resolve_neg().contiguous().reshape(-1).view(torch.uint8).numpy()
                assert desc["xor"] == fingerprint(raw)
            else:
                assert "xor" not in desc
    base = zoo[0]
    before = builder.describe_tensor(base)["Max"]
    base.add_(1.0)  # a new version: described again
    assert builder.describe_tensor(base)["Max"] == pytest.approx(before + 1.0)
    for _ in range(3):  # memory freed and allocated again (often at the same address): the dead entry is replaced
        fresh = torch.randn(64, 70)
        assert builder.describe_tensor(fresh)["Max"] == fresh.max().item()
        del fresh


def test_keyword_arguments_of_any_mapping_type_are_described_alike(tmp_path):
    import collections
    import types

    from msprobe.core.config import load_config
    from msprobe.core.dump.collector import DumpCollector
    from msprobe.core.framework import get_framework

    framework = get_framework("pytorch")
    config = load_config(write_config(tmp_path, "statistics", "L1"), framework="pytorch")
    collector = DumpCollector(config, framework.dump_adapter(), framework.stack_capture())
    collector.start()
    tensor = torch.arange(6.0).reshape(2, 3)
    plain = {"dim": 1, "keepdim": True, "out": None, "other": tensor}
    entries = []
    for kwargs in (plain, collections.OrderedDict(plain), types.MappingProxyType(plain)):
        call = collector.begin_forward("Torch.sum", (tensor,), kwargs)
        entries.append(call.entry)
    collector.close()
    assert entries[0]["input_kwargs"]["dim"] == {"type": "int", "value": 1}
    assert entries[0]["input_kwargs"]["other"]["shape"] == (2, 3)
    assert all(_same(entry, entries[0]) for entry in entries[1:])


class _Marked(torch.Tensor):
    """A tensor subclass: its hooks go through register_hook, not the hook dict."""


def _grad_calls():
    """(args, kwargs, function) of calls whose grad walks differ: leaves and non-leaves, a list argument, keyword
    tensors and `out`, a tensor passed twice, an input returned unchanged, a call of several nodes, a subclass."""
    torch.manual_seed(0)
    leaf = torch.randn(4, 8, requires_grad=True)
    weight = torch.nn.Parameter(torch.randn(6, 8))
    inner = leaf * 2
    plain = torch.randn(4, 8)
    ints = torch.arange(4)
    marked = torch.randn(4, 8).as_subclass(_Marked).requires_grad_()
    return [
        ((inner, weight), {}, torch.nn.functional.linear),
        ((inner.view(2, 2, 8), weight), {"bias": None}, torch.nn.functional.linear),  # 3-d: several nodes
        (([inner, plain, leaf], 1), {}, torch.cat),
        ((inner, inner), {}, torch.mul),  # one edge for both
        ((inner,), {"p": 0.0, "training": False}, torch.nn.functional.dropout),  # the input itself comes back
        ((leaf,), {"other": inner, "alpha": 2}, torch.add),
        ((plain, ints.float().view(4, 1)), {}, torch.add),  # no grad anywhere
        ((marked, leaf), {}, torch.add),
        ((inner.detach(),), {}, torch.relu),  # no grad in, none out
    ]


def _walked(args, kwargs, function):
    """The tracker's state after begin / the call / watch_outputs, in terms that do not depend on object ids."""
    tracker = grad_tracker.GradTracker(collector=None, pause=contextlib.nullcontext)

    class Call:
        key = "Torch.f"

    with _NoSubclassDispatch():  # as the API mode calls them (a subclass's view_as would add an alias node)
        pending = tracker.begin(Call, args, kwargs)
    output = function(*args, **kwargs)
    with _NoSubclassDispatch():
        tracker.watch_outputs(pending, output)
    nodes = {id(node): index for index, node in enumerate(pending.nodes)}

    def slot(value):
        if isinstance(value, list):
            return [slot(item) for item in value]
        return None if value is None else (nodes[value[0]], value[1])
    assert all(type(handle) is RemovableHandle for handle in tracker.handles)  # torch's own registration
    return {"args": [slot(item) for item in pending.args_layout], "kwargs": [slot(item) for item in pending.kw_layout],
            "nodes": [type(node).__name__ for node in pending.nodes], "out_count": pending.out_count,
            "outputs_left": sorted(pending.outputs_left), "contributions_left": pending.contributions_left,
            "hooks": len(tracker.handles), "kept": tracker.pending == [pending],
            "leaves": len(tracker._leaf_edges)}, tracker, output


@pytest.mark.parametrize("case", range(len(_grad_calls())))
def test_the_grad_walk_hooks_what_gives_each_inputs_grad(case):
    """Each call's walk: its hooks see, in the backward, the grads autograd computes for the call's output and for
    each grad-requiring input (summed over the input's edges), recomputed here with torch.autograd.grad."""
    state, tracker, output = _walked(*_grad_calls()[case])
    if case == 1:  # the 3-d linear: a view, mm and transpose nodes lead to the two inputs
        assert state["contributions_left"] == 2 and state["args"] == [(0, 0), (1, 0)]
    if case == 4:  # the input returned unchanged: its grad passes through the output hook
        assert state["contributions_left"] == 1 and state["outputs_left"] == [0]
    emitted = []

    def emit(pending):  # what _emit would hand to the collector
        pending.done = True
        emitted.append((list(pending.output_grads.values()), dict(pending.input_grads)))
    tracker._emit = emit
    if output.requires_grad:
        output.sum().backward(retain_graph=True)
    tracker.remove()
    assert len(emitted) == (1 if state["kept"] else 0)
    if emitted:
        (out_grads, in_grads), = emitted
        assert len(out_grads) == 1 and torch.equal(out_grads[0], torch.ones_like(output))
        # recomputed on fresh leaves of the same values (the call's own grads, not what flows on to the inputs'
        # history): one grad per distinct grad-requiring input
        args, kwargs, function = _grad_calls()[case]
        fresh = {}

        def leaf(value):
            if isinstance(value, list):
                return [leaf(item) for item in value]
            if not (isinstance(value, torch.Tensor) and value.requires_grad):
                return value
            if id(value) not in fresh:
                fresh[id(value)] = value.detach().requires_grad_()
            return fresh[id(value)]
        args, kwargs = [leaf(arg) for arg in args], {key: leaf(value) for key, value in kwargs.items()}
        expected = torch.autograd.grad(function(*args, **kwargs).sum(), list(fresh.values()))
        got = list(in_grads.values())
        assert len(got) == len(expected)
        for grad in expected:
            assert sum(torch.equal(grad, other) for other in got) == sum(torch.equal(grad, other) for other in expected)


def test_a_failing_backward_entry_is_reported_and_backward_goes_on(tmp_path, monkeypatch):
    from msprobe.core.dump.collector import DumpCollector

    def broken(self, call, grads_of_outputs, grads_of_inputs):
        raise RuntimeError("backward entry exploded")

    torch.manual_seed(0)
    plain = tiny_llama()
    plain_losses, _ = train_lm(plain, None)
    monkeypatch.setattr(DumpCollector, "backward", broken)
    torch.manual_seed(0)
    model = tiny_llama()
    debugger = PrecisionDebugger(config_path=write_config(tmp_path, "statistics", "L1"), model=model)
    losses, _ = train_lm(model, debugger)
    debugger.close()
    assert [loss.item() for loss in losses] == [loss.item() for loss in plain_losses]
    failed = debugger.collector.guard.failed
    assert "Functional.linear.0.backward" in failed and all(name.endswith(".backward") for name in failed)
    data = json.loads((tmp_path / "dump" / "step0" / "rank" / "dump.json").read_text())["data"]
    assert "Functional.linear.0.forward" in data and not any(name.endswith(".backward") for name in data)


def test_remove_takes_every_hook_off_the_graph():
    state, tracker, output = _walked(*_grad_calls()[1])  # the 3-d linear: an output hook, two consumer hooks
    kept = [(handle.hooks_dict_ref(), handle.id) for handle in tracker.handles]
    assert len(kept) == 3 and all(key in hooks for hooks, key in kept)
    emitted = []
    tracker._emit = emitted.append
    tracker.remove()
    assert tracker.handles == [] and not any(key in hooks for hooks, key in kept)
    output.sum().backward()  # the graph is still there: none of our hooks runs
    assert emitted == []


def test_the_mode_runs_its_classs_torch_function_only(tmp_path):
    """Nothing is put on the mode instance (torch and dynamo read the class's method), beside a compiled region too."""
    from pt_dump_helpers import load_rank

    model = torch.compile(torch.nn.Linear(4, 2), backend="eager")
    for models in (None, model):
        root = tmp_path / ("compiled" if models is not None else "plain")
        root.mkdir()
        debugger = PrecisionDebugger(config_path=write_config(root, "statistics", "L1"), model=models)
        debugger.start()
        mode = debugger.session.api_mode
        assert "__torch_function__" not in vars(mode)
        x = torch.ones(2, requires_grad=True)
        (x * 3).sum().backward()
        debugger.stop()
        debugger.close()
        data = load_rank(root / "dump")[0]["data"]
        assert {"Tensor.__mul__.0.forward", "Tensor.__mul__.0.backward", "Tensor.sum.0.forward"} <= set(data)
