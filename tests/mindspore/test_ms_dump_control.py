"""Dump control on MindSpore: filters (scope, list, data_mode, step, rank), hook removal, API coverage,
the MsprobeStep callback of mindspore.train.Model, and config errors."""
import os

import numpy as np
import pytest

from ms_test_helpers import fixed_input, load_dump, write_config


def _run(ms, tmp_path, steps=1, **config):
    from msprobe.mindspore import PrecisionDebugger
    from ms_models import Net, train_steps
    path, dump_path = write_config(tmp_path, **config)
    debugger = PrecisionDebugger(config_path=path)
    train_steps(debugger, Net(), fixed_input(), steps=steps)
    debugger.close()
    return dump_path


def test_step_filter_dumps_only_selected_steps(ms, tmp_path):
    dump_path = _run(ms, tmp_path, steps=3, task="statistics", level="L1", step=[1])
    assert sorted(os.listdir(dump_path)) == ["step1"]
    assert "Mint.mean.0.forward" in load_dump(dump_path, step=1)[0]["data"]


def test_list_keeps_only_named_apis(ms, tmp_path):
    dump_path = _run(ms, tmp_path, task="statistics", level="L1",
                     statistics={"list": ["MintFunctional.relu.0.forward", "tanh"]})
    names = set(load_dump(dump_path)[0]["data"])
    assert names == {"MintFunctional.relu.0.forward", "MintFunctional.relu.0.backward",
                     "Functional.tanh.0.forward", "Functional.tanh.0.backward"}


def test_scope_dumps_the_range_between_two_calls(ms, tmp_path):
    dump_path = _run(ms, tmp_path, task="statistics", level="L1",
                     statistics={"scope": ["MintFunctional.relu.0.forward", "Primitive.add.Add.0.forward"]})
    forward = [n for n in load_dump(dump_path)[0]["data"] if n.endswith("forward")]
    assert forward == ["MintFunctional.relu.0.forward", "Primitive.dense.Dense.0.forward",
                       "Tensor.__mul__.0.forward", "Primitive.add.Add.0.forward"]


def test_data_mode_forward_input_only(ms, tmp_path):
    dump_path = _run(ms, tmp_path, task="statistics", level="L1",
                     statistics={"data_mode": ["forward", "input"]})
    data = load_dump(dump_path)[0]["data"]
    assert data and all(n.endswith(".forward") for n in data)
    assert all("output" not in entry and "input_args" in entry for entry in data.values())


def test_rank_filter_skips_other_ranks(ms, tmp_path, monkeypatch):
    monkeypatch.setenv("RANK_ID", "0")
    dump_path = _run(ms, tmp_path, task="statistics", level="L1", rank=[1])
    assert not os.path.exists(dump_path) or not os.listdir(dump_path)


def test_stop_restores_every_patched_api(ms, tmp_path):
    from mindspore import Tensor, mint, ops
    from msprobe.mindspore import PrecisionDebugger
    from ms_models import Net
    before = {"add": mint.add, "relu": mint.nn.functional.relu, "tanh": ops.tanh,
              "mul": Tensor.__dict__.get("__mul__"), "Add": ops.Add.__dict__.get("__call__")}
    path, _ = write_config(tmp_path, task="statistics", level="mix")
    debugger = PrecisionDebugger(config_path=path)
    net = Net()
    debugger.start(net)
    assert mint.add is not before["add"]
    debugger.stop()
    assert mint.add is before["add"] and mint.nn.functional.relu is before["relu"] and ops.tanh is before["tanh"]
    assert Tensor.__dict__.get("__mul__") is before["mul"]
    debugger.close()
    assert ops.Add.__dict__.get("__call__") is before["Add"]
    assert not net.block.fc._forward_pre_hook and not net.block.fc._backward_hook
    # the network still computes the same thing after the hooks are gone
    out = net(Tensor(fixed_input()))
    assert np.isfinite(out.asnumpy()).all()


def test_wrapped_api_list_covers_installed_mint(ms):
    import inspect
    from mindspore import mint
    from msprobe.mindspore.dump.api_registry import api_targets
    wrapped = {(prefix, api) for _, _, prefix, api in api_targets()}
    public = [n for n in dir(mint) if not n.startswith("_") and callable(getattr(mint, n))
              and not inspect.isclass(getattr(mint, n)) and not inspect.ismodule(getattr(mint, n))]
    assert len(public) > 150
    assert {("Mint", n) for n in public if n != "absolute_import"} <= wrapped
    assert ("MintFunctional", "linear") in wrapped and ("Tensor", "__add__") in wrapped
    assert ("Functional", "relu") in wrapped


def test_msprobe_step_callback_with_model_train(ms, tmp_path):
    import mindspore.dataset as ds
    from mindspore import nn
    from mindspore.train import Model
    from msprobe.mindspore import MsprobeStep, PrecisionDebugger
    path, dump_path = write_config(tmp_path, task="statistics", level="L1")
    debugger = PrecisionDebugger(config_path=path)
    rng = np.random.RandomState(0)
    data = ds.NumpySlicesDataset({"x": rng.randn(8, 4).astype(np.float32),
                                  "y": rng.randn(8, 1).astype(np.float32)}, shuffle=False).batch(4)
    net = nn.Dense(4, 1)
    model = Model(net, loss_fn=nn.MSELoss(), optimizer=nn.SGD(net.trainable_params(), 0.01))
    model.train(1, data, callbacks=[MsprobeStep(debugger)], dataset_sink_mode=False)
    debugger.close()
    assert sorted(os.listdir(dump_path)) == ["step0", "step1"]
    assert load_dump(dump_path, step=1)[0]["data"]


def test_non_dump_task_is_rejected(ms, tmp_path):
    from msprobe.core.errors import ConfigError
    from msprobe.mindspore import PrecisionDebugger
    path, _ = write_config(tmp_path, task="run_ut")
    with pytest.raises(ConfigError, match="not a dump task"):
        PrecisionDebugger(config_path=path)


def test_seed_all_makes_initialisation_reproducible(ms, monkeypatch):
    from mindspore import Tensor, mint, nn, ops
    from msprobe.mindspore import seed_all
    # seed_all disables dropout for the whole process; register the originals so they come back
    for owner, name in ((ops, "dropout"), (ops, "dropout2d"), (ops, "dropout3d"), (mint.nn.functional, "dropout"),
                        (nn.Dropout, "construct"), (mint.nn.Dropout, "construct")):
        monkeypatch.setattr(owner, name, getattr(owner, name))
    seed_all(seed=7, rm_dropout=True)
    first = nn.Dense(4, 3).weight.asnumpy()
    seed_all(seed=7, rm_dropout=True)
    second = nn.Dense(4, 3).weight.asnumpy()
    np.testing.assert_array_equal(first, second)
    x = Tensor(fixed_input((2, 4)))
    dropout = nn.Dropout(p=0.5)
    dropout.set_train(True)
    np.testing.assert_array_equal(dropout(x).asnumpy(), x.asnumpy())  # dropout disabled
    with pytest.raises(Exception, match="seed must be an integer"):
        seed_all(seed=-1)


def test_a_failing_dump_never_breaks_the_training_call(ms, tmp_path, monkeypatch):
    from mindspore import Tensor, mint
    from msprobe.mindspore import PrecisionDebugger
    from msprobe.mindspore.dump.adapter import MindSporeAdapter
    path, dump_path = write_config(tmp_path, task="statistics", level="L1")
    debugger = PrecisionDebugger(config_path=path)

    def broken(self, tensor):
        raise RuntimeError("statistics exploded")
    monkeypatch.setattr(MindSporeAdapter, "tensor_stats", broken)
    x = fixed_input((2, 3))
    debugger.start()
    y = mint.add(Tensor(x), 1.0)
    debugger.stop()
    debugger.step()
    debugger.close()
    np.testing.assert_allclose(y.asnumpy(), x + 1.0)
