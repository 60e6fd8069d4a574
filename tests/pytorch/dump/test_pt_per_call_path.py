"""The per-call fast paths give what the general paths give: the C argument walk (native.describe_seq /
describe_map) the descriptors of RecordBuilder's Python walk, the C descriptor (native.tensor_describer) those of
RecordBuilder.describe_tensor and its cache entries, the collector's inlined stack lookup the stacks of
StackCapture.capture, and a dump taken with them the bytes of a dump taken without them."""
import contextlib
import enum
import filecmp
import json

import numpy as np
import pytest
import torch

from hf_models import tiny_llama, train_lm
from msprobe.core.dump import native, stack
from msprobe.core.dump.record import RecordBuilder
from msprobe.pytorch import PrecisionDebugger
from msprobe.pytorch.dump import grad_tracker
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


def test_c_argument_walk_gives_the_python_walks_descriptors():
    values = _values()
    python = _builder(describer=False)
    want = python.describe_args(values, None)
    fast = _builder()
    got = native.describe_seq(values, torch.Tensor, fast.describe_tensor, fast.describe)
    assert type(got) is tuple and len(got) == len(values)
    for value, left, right in zip(values, want, got):
        assert _same(left, right), (value, left, right)
    # a structseq (torch.max's values/indices) and a list are walked as their items
    assert _same(native.describe_seq(torch.max(values[0], dim=0), torch.Tensor, fast.describe_tensor, fast.describe),
                 python.describe_output(torch.max(values[0], dim=0), None))


def test_c_keyword_walk_gives_the_python_walks_descriptors():
    values = _values()
    kwargs = {f"k{i}": value for i, value in enumerate(values)}
    kwargs[7] = "a key that is not a string"
    want = _builder(describer=False).describe_kwargs(kwargs, None)
    fast = _builder()
    got = native.describe_map(kwargs, torch.Tensor, fast.describe_tensor, fast.describe)
    assert list(got) == list(want) and "7" in got
    assert _same(got, want)


def test_c_walk_passes_on_a_describe_failure():
    def failing(_):
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        native.describe_seq([1, torch.ones(2)], torch.Tensor, failing, failing)
    with pytest.raises(ValueError, match="boom"):
        native.describe_map({"x": object()}, torch.Tensor, failing, failing)
    with pytest.raises(TypeError):
        native.describe_map([1], torch.Tensor, failing, failing)


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
def test_c_descriptor_gives_describe_tensors_descriptors_and_cache_entries(mode):
    python, fast = _builder(mode, describer=False), _builder(mode)
    assert type(fast.describe_tensor).__name__ == "TensorDescriber"
    zoo = _tensor_zoo()
    for round_ in range(2):  # the second round meets every tensor in the cache
        for tensor in zoo:
            assert _same(fast.describe_tensor(tensor), python.describe_tensor(tensor)), (round_, tensor.dtype)
    base = zoo[0]
    base.add_(1.0)  # a new version: described again, a new entry
    assert _same(fast.describe_tensor(base), python.describe_tensor(base))
    for _ in range(3):  # memory freed and allocated again (often at the same address): the dead entry is replaced
        fresh = torch.randn(64, 70)
        assert _same(fast.describe_tensor(fresh), python.describe_tensor(fresh))
        del fresh
    assert _cache_view(fast).keys() == _cache_view(python).keys()
    for key, entry in _cache_view(fast).items():
        assert _same(entry[1:], _cache_view(python)[key][1:]), key
    described_in_c, handed_on = fast.describe_tensor.counts()
    assert described_in_c >= 14 and handed_on >= 14  # each side of the split taken
    # a descriptor built in C holds the statistics recomputed by torch
    ones, noisy = zoo[9], torch.randn(3000)
    desc = fast.describe_tensor(ones)
    assert (desc["Max"], desc["Min"], desc["Mean"]) == (1.0, 1.0, 1.0)
    assert desc["Norm"] == pytest.approx(float(torch.linalg.vector_norm(ones)), rel=1e-6)
    desc = fast.describe_tensor(noisy)
    assert (desc["Max"], desc["Min"]) == (noisy.max().item(), noisy.min().item())
    assert desc["Mean"] == pytest.approx(noisy.double().mean().item(), rel=1e-5, abs=1e-7)
    assert fast.describe_tensor(zoo[3])["Max"] != fast.describe_tensor(zoo[3])["Max"]  # a NaN element: NaN
    if mode == "xor":
        from msprobe.core.dump.stats import fingerprint

        assert desc["xor"] == fingerprint(noisy.numpy())
    else:
        assert "xor" not in desc


def test_c_descriptor_is_not_used_with_file_stems_or_md5():
    assert "describe_tensor" not in vars(RecordBuilder(TorchAdapter(), "md5"))
    assert "describe_tensor" not in vars(RecordBuilder(TorchAdapter(), "statistics", on_tensor=lambda *a: None))
    with pytest.raises(TypeError):
        native.tensor_describer(len, (), {}, {}, False)


def _dump_llama(root, level, monkeypatch, fast, mode="statistics"):
    if not fast:  # the general paths: the records' Python walk and describe_tensor, capture() for every stack
        monkeypatch.setattr(grad_tracker, "_begin_layout", None)  # and the grad tracker's Python walks
        monkeypatch.setattr(grad_tracker, "_watch_single", None)
        monkeypatch.setattr(grad_tracker, "_OutputHook", None)  # and its backward hooks' Python closures
        monkeypatch.setattr(grad_tracker, "_ConsumerHook", None)
        monkeypatch.setattr(grad_tracker, "_emit_native", None)
        monkeypatch.setattr(native, "describe_seq", None)
        monkeypatch.setattr(native, "describe_map", None)
        monkeypatch.setattr(native, "tensor_describer", None)
        monkeypatch.setattr(stack, "_native_stack_key", None)
    root.mkdir()
    torch.manual_seed(0)
    model = tiny_llama()
    debugger = PrecisionDebugger(config_path=write_config(root, "statistics", level, {"summary_mode": mode}),
                                 model=model)
    collector = debugger.collector
    assert (collector._walk_seq is not None) is fast and (collector._stack_key is not None) is fast
    assert ("describe_tensor" in vars(collector.records)) is fast
    assert (grad_tracker._watch_single is not None) is fast
    losses, _ = train_lm(model, debugger)
    debugger.close()
    monkeypatch.undo()
    return losses


def _same_dumps(root, left, right, names=("dump.json", "stack.json", "construct.json")):
    """Both sides under `root` wrote the same steps and each file byte for byte; `left`'s rank folders."""
    steps = sorted(p.name for p in (root / left / "dump").iterdir())
    assert steps and steps == sorted(p.name for p in (root / right / "dump").iterdir())
    folders = []
    for step in steps:
        left_dir, right_dir = (root / side / "dump" / step / "rank" for side in (left, right))
        for name in names:
            assert filecmp.cmp(left_dir / name, right_dir / name, shallow=False), (step, name)
        folders.append(left_dir)
    return folders


@pytest.mark.parametrize("level,mode", [("L1", "statistics"), ("mix", "statistics"), ("L1", "xor"), ("L2", "xor")])
def test_dump_with_the_fast_paths_is_the_dump_without_them(tmp_path, monkeypatch, level, mode):
    # one call line for both (stack.json names it)
    fast_losses, slow_losses = [_dump_llama(tmp_path / side, level, monkeypatch, side == "fast", mode)
                                for side in ("fast", "slow")]
    assert [loss.item() for loss in fast_losses] == [loss.item() for loss in slow_losses]
    for fast_dir in _same_dumps(tmp_path, "fast", "slow"):
        assert (fast_dir / "dump.json").stat().st_size > 1000


def test_keyword_arguments_of_any_mapping_type_are_described_alike(tmp_path):
    import collections
    import types

    from msprobe.core.config import load_config
    from msprobe.core.dump.collector import DumpCollector
    from msprobe.core.framework import get_framework

    framework = get_framework("pytorch")
    config = load_config(write_config(tmp_path, "statistics", "L1"), framework="pytorch")
    collector = DumpCollector(config, framework.dump_adapter(), framework.stack_capture())
    assert collector._walk_map is not None
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


def _walked(fast, args, kwargs, function):
    """The tracker's state after begin / the call / watch_outputs, in terms that do not depend on object ids."""
    tracker = grad_tracker.GradTracker(collector=None, pause=contextlib.nullcontext)
    names = ("_begin_layout", "_watch_single", "_OutputHook", "_ConsumerHook")  # the walks and the hooks they make
    saved = [getattr(grad_tracker, name) for name in names]
    if not fast:
        for name in names:
            setattr(grad_tracker, name, None)
    try:
        class Call:
            key = "Torch.f"

        pending = tracker.begin(Call, args, kwargs)
        output = function(*args, **kwargs)
        tracker.watch_outputs(pending, output)
    finally:
        for name, value in zip(names, saved):
            setattr(grad_tracker, name, value)
    nodes = {id(node): index for index, node in enumerate(pending.nodes)}

    def slot(value):
        if isinstance(value, list):
            return [slot(item) for item in value]
        return None if value is None else (nodes[value[0]], value[1])
    hooks = [type(handle).__name__ if type(handle) is not tuple else ("dict", handle[0].get(handle[1]) is handle[1])
             for handle in tracker.handles]
    # the hooks are the C callables on the fast side, the Python closures on the other
    made = {type(hook).__name__ for hooks, key in map(_hook_slot, tracker.handles) for hook in hooks.values()}
    assert made <= ({"OutputHook", "ConsumerHook"} if fast else {"function"})
    return {"args": [slot(item) for item in pending.args_layout], "kwargs": [slot(item) for item in pending.kw_layout],
            "nodes": [type(node).__name__ for node in pending.nodes], "out_count": pending.out_count,
            "outputs_left": sorted(pending.outputs_left), "contributions_left": pending.contributions_left,
            "hooks": hooks, "kept": tracker.pending == [pending], "leaves": len(tracker._leaf_edges)}, tracker, output


@pytest.mark.parametrize("case", range(len(_grad_calls())))
def test_c_grad_walk_leaves_the_tracker_as_the_python_walk_does(case):
    # each walk on tensors of its own (the same values): the hooks of one must not fire in the other's backward
    fast, fast_tracker, fast_out = _walked(True, *_grad_calls()[case])
    slow, slow_tracker, slow_out = _walked(False, *_grad_calls()[case])
    assert fast == slow
    if case == 1:  # the 3-d linear: a view, mm and transpose nodes lead to the two inputs
        assert fast["contributions_left"] == 2 and fast["args"] == [(0, 0), (1, 0)]
    if case == 4:  # the input returned unchanged: its grad passes through the output hook
        assert fast["contributions_left"] == 1 and fast["outputs_left"] == [0]
    # the hooks registered by either walk see the same grads in the backward
    grads = {}
    for side, tracker, output in (("fast", fast_tracker, fast_out), ("slow", slow_tracker, slow_out)):
        emitted = []

        def emit(pending, sink=emitted):  # what _emit would hand to the collector
            pending.done = True
            sink.append((list(pending.output_grads.values()), dict(pending.input_grads)))
        tracker._emit = emit
        if output.requires_grad:
            output.sum().backward(retain_graph=True)
        grads[side] = emitted
        tracker.remove()
    assert len(grads["fast"]) == len(grads["slow"]) == (1 if fast["kept"] else 0)
    for (fast_out_grads, fast_in), (slow_out_grads, slow_in) in zip(grads["fast"], grads["slow"]):
        assert all(torch.equal(a, b) for a, b in zip(fast_out_grads, slow_out_grads))
        assert [torch.equal(a, b) for a, b in zip(fast_in.values(), slow_in.values())] == [True] * len(slow_in)


def test_the_extensions_are_built_and_switched_on():
    """The C walks, describer and stack key (_fast_stats) and the lane, the mode's C entry, the backward hooks and emit
    (_grad_walk) are built by `pip install`: the tests here compare them with the Python paths, which they would
    otherwise compare with themselves."""
    assert None not in (native.describe_seq, native.describe_map, native.tensor_describer, grad_tracker.Lane,
                        grad_tracker.ModeEntry, grad_tracker._OutputHook, grad_tracker._ConsumerHook,
                        grad_tracker._emit_native, grad_tracker._watch_single, grad_tracker.Paused,
                        grad_tracker.register_node_hook, grad_tracker.MarkedOperator)


def _dump_llama_lane(root, monkeypatch, lane, level):
    """A tiny Llama's dump with every C path on, the mode's lane on or off; the lanes made, for their counts."""
    from msprobe.pytorch.dump import api_hooks

    made = []
    real = api_hooks._lane_for

    def recording(collector, tracker):
        made.append(real(collector, tracker))
        return made[-1]
    monkeypatch.setattr(api_hooks, "_lane_for", recording)
    if not lane:
        monkeypatch.setattr(grad_tracker, "Lane", None)
    root.mkdir()
    torch.manual_seed(0)
    model = tiny_llama()
    debugger = PrecisionDebugger(config_path=write_config(root, "statistics", level), model=model)
    losses, _ = train_lm(model, debugger)
    debugger.close()
    monkeypatch.undo()
    return losses, made


@pytest.mark.parametrize("level", ["L1", "mix"])
def test_the_lane_writes_the_dump_the_python_path_writes(tmp_path, monkeypatch, level):
    (lane_losses, lanes), (python_losses, none) = [
        _dump_llama_lane(tmp_path / side, monkeypatch, side == "lane", level) for side in ("lane", "python")]
    assert [loss.item() for loss in lane_losses] == [loss.item() for loss in python_losses]
    assert lanes and none and all(lane is not None for lane in lanes) and all(lane is None for lane in none)
    recorded, handed_back = (sum(lane.counts()[i] for lane in lanes) for i in (0, 1))
    assert recorded > 100 and handed_back == 0  # every API call took the lane
    for lane_dir in _same_dumps(tmp_path, "lane", "python"):
        data = json.loads((lane_dir / "dump.json").read_text())["data"]
        assert any(name.endswith(".backward") for name in data)  # the grads the lane's tracker walk hooked


def test_the_lane_hands_back_what_it_does_not_take_before_touching_anything(tmp_path):
    from msprobe.core.config import load_config
    from msprobe.core.dump.collector import DumpCollector
    from msprobe.pytorch.dump import api_hooks

    collector = DumpCollector(load_config(write_config(tmp_path, "statistics", "L1")), TorchAdapter())
    tracker = grad_tracker.GradTracker(collector, contextlib.nullcontext)
    lane = api_hooks._lane_for(collector, tracker)
    assert lane is not None and collector.lane_ok
    collector.start(0)
    x = torch.ones(3, requires_grad=True)
    # arguments not as torch passes them (a list, a mapping that is no dict) and a key that is no str: handed back
    for key, args, kwargs in (("Torch.add", [x, x], {}), ("Torch.add", (x, x), OrderedDictLike()), (7, (x, x), {})):
        assert lane(key, torch.add, args, kwargs) is api_hooks._REFERENCE
    assert collector.counters == {} and collector.data == {} and tracker.pending == [] and lane.counts() == (0, 3)
    # a call it takes: named, described, its stack captured, its grads watched, the output returned as is
    out = lane("Torch.mul", torch.mul, (x, x), None)
    assert torch.equal(out, x * x) and lane.counts() == (1, 3)
    entry = collector.data["Torch.mul.0.forward"]
    assert list(entry) == ["input_args", "input_kwargs", "output"] and list(entry["output"][0]["shape"]) == [3]
    assert collector.stacks["Torch.mul.0.forward"] and len(tracker.pending) == 1
    call = tracker.pending[0].call
    assert (call.name, call.index, call.dump, call.function, call.tensors) == ("Torch.mul.0.forward", 0, True,
                                                                               torch.mul, ())
    # a failing description: reported by the guard, the call runs undumped, training goes on
    collector.records.describe_tensor = _raising
    out = lane("Torch.mul", torch.mul, (x, x), None)
    assert torch.equal(out, x * x) and "Torch.mul.1.forward" not in collector.data
    assert collector.guard.failed == {"Torch.mul": 1}
    tracker.remove()


class OrderedDictLike(dict):
    """A dict subclass: the lane takes exact dicts only."""


def _raising(*_):
    raise RuntimeError("statistics exploded")


def test_the_c_backward_hooks_and_emit_write_the_dump_the_python_closures_write(tmp_path, monkeypatch):
    sides = {}
    for side in ("c", "python"):
        if side == "python":
            monkeypatch.setattr(grad_tracker, "_OutputHook", None)
            monkeypatch.setattr(grad_tracker, "_ConsumerHook", None)
            monkeypatch.setattr(grad_tracker, "_emit_native", None)
        made = []
        for name in ("_output_hook", "_consumer_hook"):
            real = getattr(grad_tracker.GradTracker, name)
            monkeypatch.setattr(grad_tracker.GradTracker, name,
                                lambda self, *args, real=real, made=made: made.append(real(self, *args)) or made[-1])
        root = tmp_path / side
        root.mkdir()
        torch.manual_seed(0)
        model = tiny_llama()
        debugger = PrecisionDebugger(config_path=write_config(root, "statistics", "mix"), model=model)
        losses, _ = train_lm(model, debugger)
        debugger.close()
        monkeypatch.undo()
        sides[side] = [loss.item() for loss in losses], {type(hook).__name__ for hook in made}
    assert sides["c"][0] == sides["python"][0]
    assert sides["c"][1] == {"OutputHook", "ConsumerHook"} and sides["python"][1] == {"function"}
    for c_dir in _same_dumps(tmp_path, "c", "python", ("dump.json",)):
        data = json.loads((c_dir / "dump.json").read_text())["data"]
        backward = [entry for name, entry in data.items() if name.endswith(".backward") or ".backward." in name]
        assert len(backward) > 50 and all(entry.get("input") for entry in backward[:50])


@pytest.mark.parametrize("native_emit", [True, False])
def test_a_failing_backward_entry_is_reported_and_backward_goes_on(tmp_path, monkeypatch, native_emit):
    from msprobe.core.dump.collector import DumpCollector

    if not native_emit:
        monkeypatch.setattr(grad_tracker, "_emit_native", None)

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


def _hook_slot(handle):
    """(the dict that holds a hook, its key) for a tracker handle: an output's (tensor hook dict, hook) pair, or a
    node hook's RemovableHandle."""
    if type(handle) is tuple:
        return handle
    return handle.hooks_dict_ref(), handle.id


@pytest.mark.parametrize("fast", [True, False])
def test_remove_takes_every_hook_off_the_graph(fast, monkeypatch):
    if not fast:
        monkeypatch.setattr(grad_tracker, "_remove_handles", None)  # the Python loop
    state, tracker, output = _walked(fast, *_grad_calls()[1])  # the 3-d linear: an output hook, two consumer hooks
    kept = [_hook_slot(handle) for handle in tracker.handles]
    assert len(kept) == 3 and all(key in hooks for hooks, key in kept)
    emitted = []
    tracker._emit = emitted.append
    tracker.remove()
    assert tracker.handles == [] and not any(key in hooks for hooks, key in kept)
    output.sum().backward()  # the graph is still there: none of our hooks runs
    assert emitted == []


def test_the_modes_c_entry_is_on_the_instance_for_the_window_only(tmp_path):
    from pt_dump_helpers import load_rank

    debugger = PrecisionDebugger(config_path=write_config(tmp_path, "statistics", "L1"))
    debugger.start()
    mode = debugger.session.api_mode
    entry = vars(mode).get("__torch_function__")
    assert type(entry).__name__ == "ModeEntry" and entry.__self__ is mode
    x = torch.ones(2, requires_grad=True)
    (x * 3).sum().backward()
    debugger.stop()
    assert "__torch_function__" not in vars(mode)  # the class's method again, for whatever holds the mode
    debugger.close()
    data = load_rank(tmp_path / "dump")[0]["data"]
    assert {"Tensor.__mul__.0.forward", "Tensor.__mul__.0.backward", "Tensor.sum.0.forward"} <= set(data)


def test_beside_a_compiled_region_the_mode_keeps_its_python_method(tmp_path):
    # dynamo reads the mode's __torch_function__ when it traces under it: a compiled module keeps the Python one
    model = torch.compile(torch.nn.Linear(4, 2), backend="eager")
    debugger = PrecisionDebugger(config_path=write_config(tmp_path, "statistics", "L1"), model=model)
    debugger.start()
    mode = debugger.session.api_mode
    assert mode.lane is not None and "__torch_function__" not in vars(mode)
    debugger.stop()
    debugger.close()


def test_c_descriptor_is_shared_only_where_it_would_be_equal():
    """The C describer hands out the descriptor it made for the same content again (an output read as the next
    call's input) when shape, requires_grad and statistics are the same; a view of the same memory with another
    shape, a detached alias and the same memory after an in-place change get their own."""
    builder = _builder()
    python = _builder(describer=False)
    x = torch.randn(4, 6, requires_grad=True) * 1.0
    others = [x.view(24), x.detach(), x.view(2, 12)]
    for tensor in [x] + others:  # a shape met for the first time is described by the Python path (it learns it)
        builder.describe_tensor(tensor.clone())
    first = builder.describe_tensor(x)
    assert builder.describe_tensor(x) is first
    got = [builder.describe_tensor(t) for t in others]
    assert all(desc is not first for desc in got) and len({id(desc) for desc in got}) == 3
    for tensor, desc in zip([x] + others, [first] + got):
        assert _same(desc, python.describe_tensor(tensor))
    y = x.detach()
    y.add_(1.0)  # a new version of the memory: new statistics
    changed = builder.describe_tensor(x)
    assert changed is not first and changed["Max"] == pytest.approx(first["Max"] + 1.0)
