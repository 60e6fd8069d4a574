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


def test_mix_list_with_a_cell_name_dumps_everything_inside_it(ms, tmp_path):
    dump_path = _run(ms, tmp_path, task="statistics", level="mix",
                     statistics={"list": ["Cell.block.fc2.Linear.forward.0"]})
    forward = [n for n in load_dump(dump_path)[0]["data"] if "forward" in n]
    assert forward == ["Cell.block.fc2.Linear.forward.0", "Primitive.dense.Dense.0.forward"] or \
        forward == ["Primitive.dense.Dense.0.forward", "Cell.block.fc2.Linear.forward.0"]


def test_data_mode_backward_only(ms, tmp_path):
    dump_path = _run(ms, tmp_path, task="statistics", level="mix", statistics={"data_mode": ["backward"]})
    data = load_dump(dump_path)[0]["data"]
    assert "Cell.block.fc.Dense.backward.0" in data and "MintFunctional.relu.0.backward" in data
    assert data["Cell.block.fc.Dense.backward.0"]["input"][0]["shape"] == [2, 8]
    assert data["Cell.block.fc.Dense.parameters_grad"]["weight"][0]["shape"] == [8, 4]
    forward = [entry for name, entry in data.items() if ".forward" in name]
    assert not any({"input_args", "input_kwargs", "output"} & set(entry) for entry in forward)


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


def _public_functions(module):
    import inspect
    return {n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n))
            and not inspect.isclass(getattr(module, n)) and not inspect.ismodule(getattr(module, n))}


def test_wrapped_api_list_covers_installed_mint(ms):
    """Every function the installed mindspore.mint namespaces export is wrapped, except helpers."""
    from mindspore import mint
    from msprobe.mindspore.dump.api_registry import api_targets
    wrapped = {(prefix, api) for _, _, prefix, api in api_targets()}
    helpers = {"absolute_import", "constexpr", "jit_forbidden_register", "jit_view_unsupported"}
    top = _public_functions(mint)
    assert len(top) > 200 and helpers - {"absolute_import"} <= top
    assert {("Mint", n) for n in top - helpers} <= wrapped
    assert not {("Mint", n) for n in helpers} & wrapped
    functional = _public_functions(mint.nn.functional)
    assert len(functional) > 60
    assert {("MintFunctional", n) for n in functional - {"absolute_import"}} <= wrapped
    for sub in ("linalg", "special"):
        names = _public_functions(getattr(mint, sub))
        assert names and {("Mint", f"{sub}.{n}") for n in names} <= wrapped
    collectives = {"all_reduce", "all_gather", "broadcast", "reduce_scatter_tensor", "send", "recv"}
    assert {("Distributed", n) for n in collectives} <= wrapped
    assert ("Distributed", "get_rank") not in wrapped and ("Distributed", "init_process_group") not in wrapped
    for api in ("__add__", "__mul__", "__getitem__", "mul", "eq", "gather", "expand", "repeat", "softmax",
                "clone", "masked_fill_", "reshape", "transpose", "sum"):
        assert ("Tensor", api) in wrapped, api
    assert ("Functional", "relu") in wrapped and ("Functional", "dense") in wrapped
    targets = api_targets()
    assert len({(id(owner), name) for owner, name, _, _ in targets}) == len(targets)  # each attribute once


def test_mint_special_and_tensor_methods_are_dumped(ms, tmp_path):
    """mint sub-namespaces are named like torch.special in PyTorch dumps (mint.linalg has no CPU kernel)."""
    from mindspore import Tensor, mint
    from msprobe.mindspore import PrecisionDebugger
    path, dump_path = write_config(tmp_path, task="statistics", level="L1")
    debugger = PrecisionDebugger(config_path=path)
    x = np.abs(fixed_input((3, 4), 7))
    debugger.start()
    grown = mint.special.expm1(Tensor(x))
    logged = mint.special.log1p(Tensor(x))
    doubled = Tensor(x).mul(2.0)
    debugger.stop()
    debugger.step()
    debugger.close()
    data = load_dump(dump_path)[0]["data"]
    assert list(data) == ["Mint.special.expm1.0.forward", "Mint.special.log1p.0.forward", "Tensor.mul.0.forward"]
    assert data["Mint.special.expm1.0.forward"]["output"][0]["Max"] == pytest.approx(np.expm1(x).max(), rel=1e-5)
    assert data["Mint.special.log1p.0.forward"]["output"][0]["Norm"] == pytest.approx(
        np.linalg.norm(np.log1p(x)), rel=1e-5)
    assert data["Tensor.mul.0.forward"]["output"][0]["Norm"] == pytest.approx(np.linalg.norm(2 * x), rel=1e-5)
    np.testing.assert_allclose(grown.asnumpy(), np.expm1(x), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(logged.asnumpy(), np.log1p(x), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(doubled.asnumpy(), 2 * x)


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


def test_msprobe_step_callback_mix_level_dumps_cells_and_apis_every_step(ms, tmp_path):
    """L0/mix with Model.train: start(model) once before train (as the reference documents), then the
    callback drives every step; Cells, their backward, parameter grads and APIs appear in each step."""
    import mindspore.dataset as ds
    from mindspore import nn
    from mindspore.train import Model
    from msprobe.mindspore import MsprobeStep, PrecisionDebugger
    from ms_models import Net
    path, dump_path = write_config(tmp_path, task="statistics", level="mix")
    debugger = PrecisionDebugger(config_path=path)
    rng = np.random.RandomState(0)
    data = ds.NumpySlicesDataset({"x": rng.randn(8, 4).astype(np.float32),
                                  "y": rng.randn(8, 1).astype(np.float32)}, shuffle=False).batch(4)
    net = Net()
    model = Model(net, loss_fn=nn.MSELoss(), optimizer=nn.SGD(net.trainable_params(), 0.01))
    debugger.start(net)
    model.train(1, data, callbacks=[MsprobeStep(debugger)], dataset_sink_mode=False)
    debugger.close()
    assert sorted(os.listdir(dump_path)) == ["step0", "step1"]
    for step in (0, 1):
        dump, _, construct = load_dump(dump_path, step=step)
        names = set(dump["data"])
        assert {"Cell.block.fc.Dense.forward.0", "Cell.block.fc.Dense.backward.0", "Cell.head.Dense.parameters_grad",
                "MintFunctional.relu.0.forward", "MintFunctional.relu.0.backward",
                "Primitive.add.Add.0.forward"} <= names, step
        assert construct["MintFunctional.relu.0.forward"] == "Cell.block.Block.forward.0"
        grad = dump["data"]["Cell.head.Dense.parameters_grad"]["weight"][0]
        assert grad["shape"] == [1, 4] and grad["Norm"] > 0


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
