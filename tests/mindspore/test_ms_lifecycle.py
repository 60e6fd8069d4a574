"""MindSpore debugger lifecycle: stop() leaves MindSpore exactly as it was, a failed install rolls back,
close() frees the debugger, `with debugger.collect(model):`, and no failing statistic reaches the step."""
import gc
import weakref

import numpy as np
import pytest

from ms_test_helpers import fixed_input, load_dump, write_config


def _snapshot(net):
    """Everything our hooks may touch: each wrapped API attribute, the hook state of every cell, the
    `__call__` of every primitive class of the net, Primitive itself and the jit executor."""
    import mindspore
    from mindspore.common import api as ms_api
    from mindspore.ops import Primitive
    from msprobe.mindspore.dump.api_registry import api_targets

    state = {}
    for owner, name, _, _ in api_targets():
        state[("api", id(owner), name)] = (vars(owner).get(name, "<inherited>"), getattr(owner, name))
    for path, cell in net.cells_and_names():
        for attr in ("_forward_pre_hook", "_forward_hook", "_backward_pre_hook", "_backward_hook",
                     "_forward_pre_hook_with_kwargs", "_forward_hook_with_kwargs"):
            state[("cell", path, attr)] = dict(getattr(cell, attr))
        state[("cell", path, "_cell_backward_hook")] = cell._cell_backward_hook
        state[("cell", path, "_primitives")] = dict(cell._primitives)
        for prim in cell._primitives.values():
            if prim is not None:
                state[("prim", type(prim).__name__)] = vars(type(prim)).get("__call__", "<inherited>")
    state["Primitive.__call__"] = vars(Primitive).get("__call__")
    executor = getattr(ms_api, "_JitExecutor", None) or ms_api._MindsporeFunctionExecutor
    state["jit"] = vars(executor).get("__call__")
    state["Tensor.__add__"] = vars(mindspore.Tensor).get("__add__", "<inherited>")
    state["gc thresholds"] = gc.get_threshold()  # raised for a dump window (core/dump/session.py)
    return state


def _differences(before, after):
    return sorted(str(key) for key in set(before) | set(after) if before.get(key) is not after.get(key)
                  and before.get(key) != after.get(key))


def _debugger(tmp_path, **config):
    from msprobe.mindspore import PrecisionDebugger
    path, dump_path = write_config(tmp_path, **config)
    return PrecisionDebugger(config_path=path), dump_path


def _jit_net():
    import mindspore as ms
    from mindspore import mint
    from ms_models import Net

    class JitNet(Net):
        @ms.jit
        def scale(self, h):
            return h * 2.0

        def construct(self, x):
            return mint.mean(self.scale(self.head(mint.tanh(self.block(x)))))
    ms.set_seed(0)  # the same initial weights in every net
    return JitNet()


def test_stop_leaves_apis_cells_primitives_and_jit_as_before(ms, tmp_path):
    from mindspore import Tensor
    from ms_models import train_steps
    debugger, dump_path = _debugger(tmp_path, task="statistics", level="mix")
    net = _jit_net()
    before = _snapshot(net)
    debugger.start(net)
    installed = _differences(before, _snapshot(net))
    assert any("_forward_pre_hook" in d for d in installed) and any("prim" in d for d in installed)
    assert any("jit" in d for d in installed) and any("api" in d for d in installed)
    assert "gc thresholds" in installed and gc.get_threshold()[0] == 50_000
    net(Tensor(fixed_input()))
    debugger.stop()
    assert _differences(before, _snapshot(net)) == []
    debugger.step()
    # the next steps re-install from the remembered model, and stop() takes everything off again
    train_steps(debugger, net, fixed_input(), steps=2, pass_model=False)
    assert _differences(before, _snapshot(net)) == []
    debugger.close()  # stop()/step() hand files to the writer without waiting; close() waits
    assert _differences(before, _snapshot(net)) == []
    names = set(load_dump(dump_path, step=2)[0]["data"])
    assert {"Cell.block.fc.Dense.forward.0", "Primitive.add.Add.0.forward", "Jit.JitNet.0.forward",
            "Cell.head.Dense.parameters_grad"} <= names


def test_no_hook_fires_after_stop(ms, tmp_path):
    """Parameter and tensor hooks live in MindSpore's C++ side: check that none of ours runs after stop,
    even with the collector forced back on."""
    from ms_models import Net, train_steps
    debugger, _ = _debugger(tmp_path, task="statistics", level="mix")
    net = Net()
    train_steps(debugger, net, fixed_input(), steps=1)
    calls = []
    collector = debugger.collector
    for event in ("begin_forward", "end_forward", "backward", "parameters_grad"):
        setattr(collector, event, lambda *args, _event=event, **kwargs: calls.append(_event))
    collector.active = True
    debugger._hooks.context.enabled = True
    train_steps(_NoDebugger(), net, fixed_input(), steps=1)
    assert calls == []
    debugger._hooks.context.enabled = False
    debugger.close()


class _NoDebugger:
    def start(self, model=None):
        pass

    stop = step = start


def test_a_failed_install_leaves_nothing_behind(ms, tmp_path, monkeypatch):
    from msprobe.mindspore.dump.api_hooks import JitPatcher
    debugger, _ = _debugger(tmp_path, task="statistics", level="mix")
    net = _jit_net()
    before = _snapshot(net)

    def broken(self, *args, **kwargs):
        raise RuntimeError("jit executor changed")
    monkeypatch.setattr(JitPatcher, "install", broken)  # installed last: everything else is in by then
    debugger.start(net)  # reported once, as on PyTorch: the step runs undumped
    assert debugger.session is None and "PrecisionDebugger.start" in debugger.collector.guard.failed
    assert _differences(before, _snapshot(net)) == []
    monkeypatch.undo()
    debugger.start(net)  # a later start works
    assert _differences(before, _snapshot(net)) != []
    debugger.stop()
    debugger.close()
    assert _differences(before, _snapshot(net)) == []


@pytest.mark.parametrize("level", ["mix", "L2"])
def test_a_closed_debugger_and_its_collector_are_freed(ms, tmp_path, level):
    """An atexit callback left registered would keep the object alive until the process ends."""
    from ms_models import Net, train_steps
    debugger, _ = _debugger(tmp_path, task="statistics", level=level)
    if level == "mix":
        train_steps(debugger, Net(), fixed_input(), steps=1)
        parts = [weakref.ref(debugger), weakref.ref(debugger.collector), weakref.ref(debugger.collector.writer)]
    else:
        parts = [weakref.ref(debugger), weakref.ref(debugger._graph)]
    debugger.close()
    del debugger
    gc.collect()
    assert [part() for part in parts] == [None] * len(parts)


def test_collect_context_starts_and_stops_also_on_an_exception(ms, tmp_path):
    import mindspore as ms_
    from mindspore import Tensor, mint, nn
    from ms_models import Net
    debugger, dump_path = _debugger(tmp_path, task="statistics", level="mix")
    net = Net()
    before = _snapshot(net)
    opt = nn.SGD(net.trainable_params(), 0.1)
    grad_fn = ms_.value_and_grad(lambda x: mint.mean(mint.square(net(x))), None, opt.parameters)
    with debugger.collect(net) as collecting:
        assert collecting is debugger and _differences(before, _snapshot(net))
        loss, grads = grad_fn(Tensor(fixed_input()))
        opt(grads)
    assert _differences(before, _snapshot(net)) == []
    debugger.step()
    with pytest.raises(ValueError, match="bad batch"):
        with debugger.collect(net):
            net(Tensor(fixed_input()))
            raise ValueError("bad batch")
    assert _differences(before, _snapshot(net)) == []
    debugger.step()
    debugger.close()
    first = load_dump(dump_path, step=0)[0]["data"]
    assert {"Cell.block.fc.Dense.forward.0", "Cell.block.fc.Dense.backward.0"} <= set(first)
    assert first["Mint.mean.1.forward"]["output"][0]["Max"] == pytest.approx(float(loss.asnumpy()), rel=1e-6)
    assert "Cell.block.fc.Dense.forward.0" in load_dump(dump_path, step=1)[0]["data"]


def _train_everything(net, x, debugger=None):
    """One step through every hook path: APIs, Cells, parameters, primitives, a jit method, a collective
    (its hook path, around a stand-in that works in place like mint.distributed.all_reduce) and save()."""
    import mindspore as ms_
    from mindspore import Tensor, mint
    from msprobe.mindspore import PrecisionDebugger

    def loss_fn(data):
        hidden = net(data)
        PrecisionDebugger.save(hidden, "hidden")
        return mint.mean(mint.square(hidden))
    grad_fn = ms_.value_and_grad(loss_fn, None, net.trainable_params())
    if debugger is not None:
        debugger.start(net)
    loss, grads = grad_fn(Tensor(x))
    summed = Tensor(x)
    if debugger is not None:
        def all_reduce_stand_in(tensor):
            tensor.add_(1.0)
        debugger._hooks.context.api_call("Distributed", "all_reduce", all_reduce_stand_in, (summed,), {})
        debugger.stop()
        debugger.step()
    else:
        summed.add_(1.0)
    return [loss.asnumpy()] + [g.asnumpy() for g in grads] + [summed.asnumpy()]


@pytest.mark.parametrize("task", ["statistics", "tensor", "overflow_check"])
def test_a_failing_statistic_never_reaches_the_step_on_any_hook_path(ms, tmp_path, monkeypatch, task):
    from msprobe.mindspore.dump.adapter import MindSporeAdapter
    x = fixed_input()
    expected = _train_everything(_jit_net(), x)

    def broken(self, tensor):
        raise RuntimeError("statistics exploded")
    monkeypatch.setattr(MindSporeAdapter, "tensor_stats", broken)
    debugger, _ = _debugger(tmp_path, task=task, level="mix")
    got = _train_everything(_jit_net(), x, debugger)
    debugger.close()
    assert len(got) == len(expected)
    for value, reference in zip(got, expected):
        np.testing.assert_array_equal(value, reference)
    assert debugger.collector.guard.failed  # the failures were seen and logged, not raised
