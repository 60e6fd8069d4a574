"""The backward side's hooks: the grad tracker puts its hooks on outputs and autograd nodes through torch's public
registration (`Tensor.register_hook`, `Node.register_hook`) and takes them off through the handles those return; the
backward entries it writes, a replaced `DumpCollector.backward` or `_emit`, the pause, the Tensor operator wrappers."""
import pytest
import torch
from torch.utils.hooks import RemovableHandle

from msprobe.core.dump.collector import DumpCollector
from msprobe.core.dump.session import Reentrancy
from msprobe.pytorch import PrecisionDebugger
from msprobe.pytorch.dump import dump_session, grad_tracker
from pt_dump_helpers import MLP, load_rank, write_config


def _step(debugger, model):
    debugger.start()
    loss = model(torch.randn(3, 4)).pow(2).mean()
    loss.backward()
    debugger.stop()
    debugger.step()


def test_the_backward_entries_of_a_step_and_their_grads(tmp_path):
    torch.manual_seed(0)
    model = MLP()
    debugger = PrecisionDebugger(config_path=write_config(tmp_path, "statistics", "L1"), model=model)
    _step(debugger, model)
    debugger.close()
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


def test_the_hooks_are_registered_through_torchs_handles_and_leave_a_users_hooks_alone(tmp_path):
    """Our hooks are torch's RemovableHandles (nothing of torch's is replaced in the window); a hook of the user's on a
    node one of ours is on runs beside it, and stays when stop() takes ours off."""
    torch.manual_seed(0)
    model = MLP()
    debugger = PrecisionDebugger(config_path=write_config(tmp_path, "statistics", "L1"), model=model)
    debugger.start()
    out = model(torch.randn(3, 4))
    handles = debugger.session.tracker.handles
    assert handles and all(type(handle) is RemovableHandle for handle in handles)
    node = out.grad_fn
    sent = []
    user = node.register_hook(lambda grad_inputs, grad_outputs: sent.append(len(grad_inputs)))
    ours = [handle for handle in handles if user.id in handle.hooks_dict_ref()]  # the hook dict of `node`
    assert len(ours) == 1
    node_hooks = ours[0].hooks_dict_ref()
    out.sum().backward(retain_graph=True)
    assert sent == [3]
    debugger.stop()
    assert list(node_hooks) == [user.id]  # ours taken off at stop(), the user's kept
    user.remove()
    assert not node_hooks
    out.sum().backward()
    assert sent == [3]
    debugger.close()
    data = load_rank(tmp_path / "dump")[0]["data"]
    assert "Functional.linear.1.backward" in data


def test_paused_counts_the_guard_up_and_down_and_gives_back_the_failure():
    paused = dump_session._Paused
    guard = Reentrancy()
    pause = paused(guard)
    assert pause.__enter__() is pause and guard._local.depth == 1 and not torch._C._is_torch_function_enabled()
    assert pause.__exit__(ValueError, ValueError("x"), None) is False  # the failure is not swallowed
    assert guard._local.depth == 0 and torch._C._is_torch_function_enabled()
    with paused(guard), paused(guard):  # nested: still paused after the inner one ends
        pass
    assert guard._local.depth == 0 and torch._C._is_torch_function_enabled()


def test_remove_calls_every_handles_remove_once_and_forgets_them():
    removed = []

    class Handle:
        def remove(self):
            removed.append(self)
    handles = [Handle(), Handle()]
    tracker = grad_tracker.GradTracker(collector=None, pause=None)
    tracker.handles = list(handles)
    tracker.remove()
    assert removed == handles and tracker.handles == [] and tracker.pending == []


def test_a_calls_own_node_takes_its_outputs_grad_as_the_node_received_it():
    """One hook for a call whose single output comes from a node that feeds its inputs: the consumer hook of that
    node takes the output's grad from the grads the node received, so a hook of the user's that changes the grad on
    the output is seen changed, as the call's backward saw it (and the inputs' grads follow from it). A call of
    several nodes keeps the output's own hook."""
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


def test_an_operator_wrapper_marks_its_call_binds_as_a_method_and_clears_the_mark():
    from msprobe.pytorch.dump import api_hooks

    seen = []

    def operator(*args, **kwargs):
        seen.append((api_hooks._MARK.key, args, kwargs))
        if kwargs.get("fail"):
            raise ValueError("inside the operator")
        return NotImplemented  # passed on as it is (Python then tries the other operand)

    wrapper = api_hooks._marking("__mul__", operator)
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

