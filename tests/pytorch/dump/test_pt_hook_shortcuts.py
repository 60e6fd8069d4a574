"""The backward side's shortcuts (_grad_walk.c): where GradTracker's hook factories and _emit and DumpCollector.backward
are still their classes' own, the C hooks run them without a Python frame; the consumer hooks go onto autograd nodes
without torch's Python handle, through a registration the window puts in torch's place and takes back at stop();
dump_session's pause is the C Paused. Each gives what the Python path gives (test_pt_per_call_path.py compares whole
dumps); these tests check that the shortcuts are taken, and that what is not ours still takes torch's own path."""
import sys

import pytest
import torch
from torch.autograd.function import _HookMixin
from torch.utils.hooks import RemovableHandle

from msprobe.core.dump.collector import DumpCollector
from msprobe.core.dump.session import Reentrancy
from msprobe.pytorch import PrecisionDebugger
from msprobe.pytorch.dump import dump_session, grad_tracker
from pt_dump_helpers import MLP, load_rank, write_config

def _python_calls(codes, work):
    """How many times each code object in `codes` ran as a Python frame during work()."""
    counts = dict.fromkeys(codes, 0)

    def profile(frame, event, _arg):
        if event == "call" and frame.f_code in counts:
            counts[frame.f_code] += 1
    sys.setprofile(profile)
    try:
        work()
    finally:
        sys.setprofile(None)
    return counts


def _step(debugger, model):
    debugger.start()
    loss = model(torch.randn(3, 4)).pow(2).mean()
    loss.backward()
    debugger.stop()
    debugger.step()


def test_the_backward_side_runs_without_python_frames_and_writes_the_backward_entries(tmp_path):
    torch.manual_seed(0)
    model = MLP()
    debugger = PrecisionDebugger(config_path=write_config(tmp_path, "statistics", "L1"), model=model)
    codes = {DumpCollector.backward.__code__: "DumpCollector.backward",
             grad_tracker.GradTracker._emit.__code__: "GradTracker._emit",
             grad_tracker.GradTracker._output_hook.__code__: "GradTracker._output_hook",
             grad_tracker.GradTracker._consumer_hook.__code__: "GradTracker._consumer_hook",
             RemovableHandle.__init__.__code__: "RemovableHandle.__init__",
             dump_session._PyPaused.__enter__.__code__: "_PyPaused.__enter__"}
    counts = _python_calls(codes, lambda: _step(debugger, model))
    debugger.close()
    assert {codes[code]: count for code, count in counts.items()} == dict.fromkeys(codes.values(), 0)
    data = load_rank(tmp_path / "dump")[0]["data"]
    backward = {name: entry for name, entry in data.items() if name.endswith(".backward")}
    assert set(backward) == {"Functional.linear.0.backward", "Functional.linear.1.backward", "Torch.relu.0.backward",
                             "Tensor.pow.0.backward", "Tensor.mean.0.backward"}
    # the grads w.r.t. the second linear's input: its consumer hook's; w.r.t. its output: the output hook's
    linear = backward["Functional.linear.1.backward"]
    assert [desc["shape"] if desc else None for desc in linear["output"]] == [[3, 8], [2, 8], [2]]
    assert [desc["shape"] for desc in linear["input"]] == [[3, 2]]


def test_a_replaced_backward_or_emit_is_called_as_before(tmp_path, monkeypatch):
    seen = []
    real_backward = DumpCollector.backward

    def backward(self, call, grads_of_outputs, grads_of_inputs):
        seen.append(call.backward_name)
        return real_backward(self, call, grads_of_outputs, grads_of_inputs)
    monkeypatch.setattr(DumpCollector, "backward", backward)
    torch.manual_seed(0)
    model = MLP()
    debugger = PrecisionDebugger(config_path=write_config(tmp_path, "statistics", "L1"), model=model)
    _step(debugger, model)
    emitted = []
    debugger.start()
    debugger.session.tracker._emit = emitted.append  # the instance's own: the hooks call it
    model(torch.randn(3, 4)).pow(2).mean().backward()
    debugger.stop()
    debugger.close()
    assert sorted(seen) == ["Functional.linear.0.backward", "Functional.linear.1.backward", "Tensor.mean.0.backward",
                            "Tensor.pow.0.backward", "Torch.relu.0.backward"]
    # every hook whose grads completed a call hands its record over (the replaced _emit marks none done)
    assert len({id(pending) for pending in emitted}) == 5
    assert {pending.call.backward_name for pending in emitted} == set(seen)


def test_the_node_hook_registration_is_ours_in_the_window_only_and_passes_on_other_hooks(tmp_path):
    original = _HookMixin.__dict__["_register_hook"]
    torch.manual_seed(0)
    model = MLP()
    debugger = PrecisionDebugger(config_path=write_config(tmp_path, "statistics", "L1"), model=model)
    debugger.start()
    assert _HookMixin.__dict__["_register_hook"] is grad_tracker.register_node_hook
    out = model(torch.randn(3, 4))
    handles = debugger.session.tracker.handles
    assert handles and all(type(handle) is tuple for handle in handles)  # (hook dict, hook): no RemovableHandle
    # a hook of the user's on a node our consumer hook is on: torch's own handle, into the same dict, and it runs
    node = out.grad_fn
    sent = []
    user = node.register_hook(lambda grad_inputs, grad_outputs: sent.append(len(grad_inputs)))
    assert type(user) is RemovableHandle
    ours = [hooks for hooks, hook in handles if type(hook).__name__ == "ConsumerHook" and user.id in hooks]
    assert len(ours) == 1
    out.sum().backward(retain_graph=True)
    assert sent == [3]
    debugger.stop()
    assert _HookMixin.__dict__["_register_hook"] is original  # the staticmethod itself, not its function
    assert all(type(hook).__name__ != "ConsumerHook" for hook in ours[0].values())  # ours taken off at stop()
    user.remove()
    assert not ours[0]
    out.sum().backward()
    assert sent == [3]
    debugger.close()
    data = load_rank(tmp_path / "dump")[0]["data"]
    assert "Functional.linear.1.backward" in data


@pytest.mark.parametrize("paused", [grad_tracker.Paused, dump_session._PyPaused], ids=["c", "python"])
def test_paused_counts_the_guard_up_and_down_and_gives_back_the_failure(paused):
    guard = Reentrancy()
    pause = paused(guard)
    assert pause.__enter__() is pause and guard._local.depth == 1 and not torch._C._is_torch_function_enabled()
    assert pause.__exit__(ValueError, ValueError("x"), None) is False  # the failure is not swallowed
    assert guard._local.depth == 0 and torch._C._is_torch_function_enabled()
    with paused(guard), paused(guard):  # nested: still paused after the inner one ends
        pass
    assert guard._local.depth == 0 and torch._C._is_torch_function_enabled()


def test_removing_handles_pops_pairs_once_and_calls_other_handles_remove():
    from collections import OrderedDict

    hooks, removed = OrderedDict(a=1, b=2), []

    class Handle:
        def remove(self):
            removed.append(self)
    handle = Handle()
    for remove in (grad_tracker._remove_handles, None):
        tracker = grad_tracker.GradTracker(collector=None, pause=None)
        tracker.handles = [(hooks, "a"), (hooks, "a"), handle]  # a key already gone is no error
        if remove is None:
            grad_tracker._remove_handles, saved = None, grad_tracker._remove_handles
            try:
                tracker.remove()
            finally:
                grad_tracker._remove_handles = saved
        else:
            tracker.remove()
        assert list(hooks) == ["b"] and tracker.handles == []
        hooks["a"] = 1
    assert removed == [handle, handle]
    with pytest.raises(TypeError):
        grad_tracker._remove_handles([(42, "x")])  # not a mapping: raised, as pop() would


@pytest.mark.parametrize("fast", [True, False], ids=["c", "python"])
def test_a_calls_own_node_takes_its_outputs_grad_as_the_node_received_it(fast, monkeypatch):
    """One hook for a call whose single output comes from a node that feeds its inputs: the consumer hook of that
    node takes the output's grad from the grads the node received, so a hook of the user's that changes the grad on
    the output is seen changed, as the call's backward saw it (and the inputs' grads follow from it). A call of
    several nodes keeps the output's own hook."""
    if not fast:
        for name in ("_begin_layout", "_watch_single", "_OutputHook", "_ConsumerHook", "_emit_native"):
            monkeypatch.setattr(grad_tracker, name, None)
    tracker = grad_tracker.GradTracker(collector=None, pause=None)
    emitted = []

    def emit(pending):
        pending.done = True
        emitted.append((dict(pending.output_grads), dict(pending.input_grads)))
    tracker._emit = emit

    class Call:
        key = "Torch.mul"

    weight = torch.full((3,), 3.0, requires_grad=True)
    x = torch.arange(3.0, requires_grad=True) * 1.0
    pending = tracker.begin(Call, (x, weight), {})
    out = torch.mul(x, weight)
    tracker.watch_outputs(pending, out)
    assert len(tracker.handles) == 1 and out._backward_hooks is None  # the node's hook only
    out.register_hook(lambda grad: grad * 2)  # the user's
    out.sum().backward()
    (output_grads, input_grads), = emitted
    assert torch.equal(output_grads[0], torch.full((3,), 2.0))
    assert sorted(g.tolist() for g in input_grads.values()) == [[0.0, 2.0, 4.0], [6.0, 6.0, 6.0]]
    tracker.remove()
    # a 3-d linear: view, mm and view nodes; the output's node feeds no input: its own hook on the output
    args = (x.view(1, 1, 3), weight.view(1, 3))
    pending = tracker.begin(Call, args, {})
    out = torch.nn.functional.linear(*args)
    tracker.watch_outputs(pending, out)
    assert out._backward_hooks is not None and len(tracker.handles) == 3
    tracker.remove()


@pytest.mark.parametrize("fast", [True, False], ids=["c", "python"])
def test_an_operator_wrapper_marks_its_call_binds_as_a_method_and_clears_the_mark(fast, monkeypatch):
    from msprobe.pytorch.dump import api_hooks

    if not fast:
        monkeypatch.setattr(grad_tracker, "MarkedOperator", None)
    seen = []

    def operator(*args, **kwargs):
        seen.append((api_hooks._MARK.key, args, kwargs))
        if kwargs.get("fail"):
            raise ValueError("inside the operator")
        return NotImplemented  # passed on as it is (Python then tries the other operand)

    wrapper = api_hooks._marking("__mul__", operator)
    assert (type(wrapper).__name__ == "MarkedOperator") is fast
    assert wrapper.__wrapped__ is operator and wrapper.__name__ == "operator"

    class Holder:
        op = wrapper

    holder = Holder()
    assert holder.op(2, k=1) is NotImplemented and Holder.op(holder, 3) is NotImplemented
    with pytest.raises(ValueError, match="inside the operator"):
        holder.op(fail=True)
    assert seen == [("Tensor.__mul__", (holder, 2), {"k": 1}), ("Tensor.__mul__", (holder, 3), {}),
                    ("Tensor.__mul__", (holder,), {"fail": True})]
    assert api_hooks._MARK.key is None


def test_the_lanes_forward_names_are_made_once_a_process_and_are_the_names_of_the_step(tmp_path):
    torch.manual_seed(0)
    model = MLP()
    debugger = PrecisionDebugger(config_path=write_config(tmp_path, "statistics", "L1"), model=model)
    for step in range(2):
        debugger.start()
        model(torch.randn(3, 4)).pow(2).mean().backward()
        names = debugger.collector._lane_names
        assert names["Functional.linear"] == ["Functional.linear.0.forward", "Functional.linear.1.forward"]
        if step == 1:  # the same str objects name the second step's entries
            kept = {id(name) for known in names.values() for name in known}
            forward = [name for name in debugger.collector.data if name.endswith(".forward")]
            assert len(forward) == 5 and all(id(name) in kept for name in forward)
        debugger.stop()
        debugger.step()
    debugger.close()
    assert set(load_rank(tmp_path / "dump", step=1)[0]["data"]) == set(load_rank(tmp_path / "dump", step=0)[0]["data"])
