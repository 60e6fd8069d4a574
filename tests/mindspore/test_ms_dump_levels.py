"""PyNative dump of real MindSpore models: levels L0 / L1 / mix x tasks statistics / tensor / md5 / overflow."""
import os
import zlib

import numpy as np
import pytest

from ms_test_helpers import fixed_input, load_dump, write_config


def _debugger(tmp_path, **config):
    from msprobe.mindspore import PrecisionDebugger
    path, dump_path = write_config(tmp_path, **config)
    return PrecisionDebugger(config_path=path), dump_path


def _matmul_tanh_run(ms, tmp_path, **config):
    """f(x, w) = mean(tanh(x @ w) * 2) under the debugger; returns (dump, x, w, grads)."""
    from mindspore import Tensor, mint
    debugger, dump_path = _debugger(tmp_path, **config)
    x, w = fixed_input((3, 4), 1), fixed_input((4, 5), 2)

    def f(a, b):
        return mint.mean(mint.tanh(mint.matmul(a, b)) * 2)
    debugger.start()
    grads = ms.grad(f, grad_position=(0, 1))(Tensor(x), Tensor(w))
    debugger.stop()
    debugger.step()
    debugger.close()
    return load_dump(dump_path), x, w, [g.asnumpy() for g in grads]


def test_l1_statistics_names_and_values_match_numpy(ms, tmp_path):
    (dump, stack, construct), x, w, grads = _matmul_tanh_run(ms, tmp_path, task="statistics", level="L1")
    data = dump["data"]
    assert dump["framework"] == "mindspore" and dump["level"] == "L1"
    assert list(data)[:4] == ["Mint.matmul.0.forward", "Mint.tanh.0.forward", "Tensor.__mul__.0.forward",
                              "Mint.mean.0.forward"]
    out = data["Mint.matmul.0.forward"]["output"][0]
    expected = x @ w
    assert out["type"] == "mindspore.Tensor" and out["dtype"] == "Float32" and out["shape"] == [3, 5]
    assert out["Max"] == pytest.approx(expected.max(), rel=1e-5)
    assert out["Min"] == pytest.approx(expected.min(), rel=1e-5)
    assert out["Mean"] == pytest.approx(expected.mean(), rel=1e-4)
    assert out["Norm"] == pytest.approx(np.linalg.norm(expected), rel=1e-5)
    # backward: input = grad of the output, output = grads of (x, w), equal to what ms.grad returned
    back = data["Mint.matmul.0.backward"]
    assert back["input"][0]["shape"] == [3, 5]
    assert back["output"][0]["Norm"] == pytest.approx(np.linalg.norm(grads[0]), rel=1e-5)
    assert back["output"][1]["Norm"] == pytest.approx(np.linalg.norm(grads[1]), rel=1e-5)
    assert "Tensor.__mul__.0.backward" in data and "Mint.mean.0.backward" in data
    assert any("test_ms_dump_levels.py" in line for line in stack["Mint.matmul.0.forward"])
    assert construct == {}  # L1 has no hierarchy


def test_l1_tensor_files_hold_the_real_tensors(ms, tmp_path):
    (dump, _, _), x, w, grads = _matmul_tanh_run(ms, tmp_path, task="tensor", level="L1")
    base = os.path.join(str(tmp_path), "dump", "step0", "rank", "dump_tensor_data")
    entry = dump["data"]["Mint.matmul.0.forward"]
    assert entry["input_args"][0]["data_name"] == "Mint.matmul.0.forward.input.0.npy"
    np.testing.assert_array_equal(np.load(os.path.join(base, "Mint.matmul.0.forward.input.1.npy")), w)
    np.testing.assert_allclose(np.load(os.path.join(base, "Mint.matmul.0.forward.output.0.npy")), x @ w, rtol=1e-5)
    np.testing.assert_allclose(np.load(os.path.join(base, "Mint.matmul.0.backward.output.1.npy")), grads[1],
                               rtol=1e-5)
    assert dump["dump_data_dir"].endswith(os.path.join("step0", "rank", "dump_tensor_data"))


def test_l1_md5_is_crc32_of_the_tensor_bytes(ms, tmp_path):
    (dump, _, _), x, w, _ = _matmul_tanh_run(ms, tmp_path, task="statistics", level="L1",
                                            statistics={"summary_mode": "md5"})
    args = dump["data"]["Mint.matmul.0.forward"]["input_args"]
    assert args[0]["md5"] == f"{zlib.crc32(x.tobytes()):08x}"
    assert args[1]["md5"] == f"{zlib.crc32(w.tobytes()):08x}"
    assert "Max" in args[0]


def test_l0_cells_parameters_and_parameter_grads(ms, tmp_path):
    from ms_models import Net, train_steps
    debugger, dump_path = _debugger(tmp_path, task="statistics", level="L0")
    net = Net()
    weight_before = net.block.fc.weight.asnumpy().copy()
    (loss, grads), = train_steps(debugger, net, fixed_input())
    debugger.close()
    dump, _, construct = load_dump(dump_path)
    data = dump["data"]
    names = list(data)
    assert {"Cell.block.fc.Dense.forward.0", "Cell.block.fc2.Linear.forward.0", "Cell.block.Block.forward.0",
            "Cell.head.Dense.forward.0", "Cell.block.fc.Dense.backward.0", "Cell.head.Dense.backward.0",
            "Cell.block.fc.Dense.parameters_grad"} <= set(names)
    assert not any(n.startswith(("Mint.", "Tensor.", "Primitive.")) for n in names)
    fc = data["Cell.block.fc.Dense.forward.0"]
    assert fc["parameters"]["weight"]["Norm"] == pytest.approx(np.linalg.norm(weight_before), rel=1e-5)
    grad_by_name = {p.name: g.asnumpy() for p, g in zip(net.trainable_params(), grads)}
    dumped_grad = data["Cell.block.fc.Dense.parameters_grad"]["weight"][0]
    assert dumped_grad["Norm"] == pytest.approx(np.linalg.norm(grad_by_name["block.fc.weight"]), rel=1e-5)
    # backward of fc: input = grad w.r.t. its output (2x8); output = grad w.r.t. its input
    assert data["Cell.block.fc.Dense.backward.0"]["input"][0]["shape"] == [2, 8]
    assert construct["Cell.block.fc.Dense.forward.0"] == "Cell.block.Block.forward.0"
    assert construct["Cell.block.Block.forward.0"] is None
    assert construct["Cell.block.fc.Dense.backward.0"] == "Cell.block.Block.backward.0"


def test_l0_tensor_files_of_parameters_and_parameter_grads(ms, tmp_path):
    """File names as the reference documents: {cell}.forward.0.parameters.{name}.npy and
    {cell}.parameters_grad.{name}.npy, holding the real weight and its gradient."""
    from ms_models import Net, train_steps
    debugger, dump_path = _debugger(tmp_path, task="tensor", level="L0")
    net = Net()
    weight_before = net.block.fc.weight.asnumpy().copy()
    (_, grads), = train_steps(debugger, net, fixed_input())
    debugger.close()
    data = load_dump(dump_path)[0]["data"]
    base = os.path.join(dump_path, "step0", "rank", "dump_tensor_data")
    weight = data["Cell.block.fc.Dense.forward.0"]["parameters"]["weight"]
    assert weight["data_name"] == "Cell.block.fc.Dense.forward.0.parameters.weight.npy"
    np.testing.assert_array_equal(np.load(os.path.join(base, weight["data_name"])), weight_before)
    grad = data["Cell.block.fc.Dense.parameters_grad"]["weight"][0]
    assert grad["data_name"] == "Cell.block.fc.Dense.parameters_grad.weight.npy"
    grad_by_name = {p.name: g.asnumpy() for p, g in zip(net.trainable_params(), grads)}
    np.testing.assert_allclose(np.load(os.path.join(base, grad["data_name"])), grad_by_name["block.fc.weight"],
                               rtol=1e-6)
    back = data["Cell.block.fc.Dense.backward.0"]["input"][0]
    assert back["data_name"] == "Cell.block.fc.Dense.backward.0.input.0.npy"
    assert np.load(os.path.join(base, back["data_name"])).shape == (2, 8)


def test_mix_nests_apis_and_primitives_under_cells(ms, tmp_path):
    from ms_models import Net, train_steps
    debugger, dump_path = _debugger(tmp_path, task="statistics", level="mix")
    train_steps(debugger, Net(), fixed_input())
    debugger.close()
    dump, _, construct = load_dump(dump_path)
    assert construct["MintFunctional.relu.0.forward"] == "Cell.block.Block.forward.0"
    assert construct["Primitive.dense.Dense.0.forward"] == "Cell.block.fc2.Linear.forward.0"
    assert construct["Primitive.add.Add.0.forward"] == "Cell.block.Block.forward.0"
    assert construct["Tensor.__mul__.0.forward"] == "Cell.block.Block.forward.0"
    assert construct["MintFunctional.relu.0.backward"] == "Cell.block.Block.backward.0"
    assert "Functional.tanh.0.forward" in dump["data"] and "Jit.SGD.0.forward" in dump["data"]
    assert not any("_cell_backward_hook" in name for name in dump["data"])  # MindSpore's own machinery


def test_overflow_check_dumps_only_calls_with_inf_or_nan(ms, tmp_path):
    from mindspore import Tensor, mint
    debugger, dump_path = _debugger(tmp_path, task="overflow_check", level="L1",
                                    overflow_check={"overflow_nums": 1})
    x = Tensor(np.array([1.0, 0.0, 4.0], np.float32))
    debugger.start()
    y = mint.sqrt(x)          # fine
    z = mint.div(y, Tensor(np.zeros(3, np.float32)))  # inf and nan
    w = mint.add(z, 1.0)      # also inf, but overflow_nums=1 stops before it
    debugger.stop()
    debugger.step()
    debugger.close()
    assert np.isinf(w.asnumpy()).any()
    data = load_dump(dump_path)[0]["data"]
    assert list(data) == ["Mint.div.0.forward"]
    files = os.listdir(os.path.join(dump_path, "step0", "rank", "dump_tensor_data"))
    assert sorted(files) == ["Mint.div.0.forward.input.0.npy", "Mint.div.0.forward.input.1.npy",
                             "Mint.div.0.forward.output.0.npy"]


def test_jit_function_runs_and_is_recorded(ms, tmp_path):
    from mindspore import Tensor, mint

    @ms.jit
    def scaled_sum(a):
        return mint.sum(a * 3.0)
    debugger, dump_path = _debugger(tmp_path, task="statistics", level="L1")
    x = fixed_input((2, 3))
    debugger.start()
    out = scaled_sum(Tensor(x))
    debugger.stop()
    debugger.step()
    debugger.close()
    assert float(out.asnumpy()) == pytest.approx(float((x * 3).sum()), rel=1e-5)
    entry = load_dump(dump_path)[0]["data"]["Jit.scaled_sum.0.forward"]
    assert entry["output"][0]["Max"] == pytest.approx(float((x * 3).sum()), rel=1e-5)
    assert "Mint.sum.0.forward" not in load_dump(dump_path)[0]["data"]  # inside the graph


def test_save_writes_debug_json(ms, tmp_path):
    from mindspore import Tensor
    debugger, dump_path = _debugger(tmp_path, task="statistics", level="L1")
    x = fixed_input((2, 2))
    debugger.start()
    debugger.save(Tensor(x), "activation")
    debugger.stop()
    debugger.step()
    debugger.close()
    import json
    with open(os.path.join(dump_path, "step0", "rank", "debug.json")) as handle:
        debug = json.load(handle)
    assert debug["data"]["activation.0.debug"]["Max"] == pytest.approx(float(x.max()))


def test_save_records_the_gradient_of_a_saved_tensor(ms, tmp_path):
    import json
    from mindspore import Tensor, mint
    from msprobe.mindspore import PrecisionDebugger
    debugger, dump_path = _debugger(tmp_path, task="statistics", level="L1")
    x = fixed_input((2, 3))

    def f(a):
        hidden = mint.tanh(a)
        PrecisionDebugger.save(hidden, "hidden")                  # class-level call, as in PyTorch
        PrecisionDebugger.save(hidden, "no_grad", save_backward=False)
        return mint.sum(hidden * hidden)
    debugger.start()
    ms.grad(f)(Tensor(x))
    debugger.stop()
    debugger.step()
    debugger.close()
    with open(os.path.join(dump_path, "step0", "rank", "debug.json")) as handle:
        data = json.load(handle)["data"]
    assert sorted(data) == ["hidden.0.debug", "hidden_grad.0.debug", "no_grad.0.debug"]
    assert data["hidden.0.debug"]["Norm"] == pytest.approx(np.linalg.norm(np.tanh(x)), rel=1e-5)
    assert data["hidden_grad.0.debug"]["Norm"] == pytest.approx(np.linalg.norm(2 * np.tanh(x)), rel=1e-5)


@pytest.mark.parametrize("level", ["L0", "L1", "mix"])
@pytest.mark.parametrize("task, summary_mode", [("statistics", "statistics"), ("statistics", "md5"),
                                                ("tensor", "statistics"), ("overflow_check", None)])
def test_every_level_and_task_on_a_real_model(ms, tmp_path, level, task, summary_mode):
    """Level x task matrix on the same small network: the right entry kinds and the right payload."""
    from ms_models import Net, train_steps
    section = {"summary_mode": summary_mode} if summary_mode else {}
    debugger, dump_path = _debugger(tmp_path, task=task, level=level, **{task: section})
    net = Net()
    if task == "overflow_check":  # a head weight of inf makes every later output inf
        net.head.weight.set_data(ms.Tensor(np.full((1, 4), np.inf, np.float32)))
    train_steps(debugger, net, fixed_input())
    debugger.close()
    dump, _, construct = load_dump(dump_path)
    names = list(dump["data"])
    cells = [n for n in names if n.startswith("Cell.")]
    apis = [n for n in names if not n.startswith("Cell.")]
    if task == "overflow_check":
        first = dump["data"][names[0]]
        assert names[0] in ("Cell.head.Dense.forward.0", "Primitive.matmul.MatMul.1.forward")
        assert not np.isfinite(first["output"][0]["Max"]) or not np.isfinite(first["output"][0]["Min"])
        assert len(names) == 1  # overflow_nums defaults to 1
        return
    assert bool(cells) == (level in ("L0", "mix")) and bool(apis) == (level in ("L1", "mix"))
    assert bool(construct) == (level != "L1")
    descriptor = dump["data"][names[0]]["input_args"][0]
    assert descriptor["type"] == "mindspore.Tensor" and descriptor["dtype"] == "Float32"
    if summary_mode == "md5":
        assert len(descriptor["md5"]) == 8
    if task == "tensor":
        path = os.path.join(dump_path, "step0", "rank", "dump_tensor_data", descriptor["data_name"])
        assert np.linalg.norm(np.load(path)) == pytest.approx(descriptor["Norm"], rel=1e-5)
    else:
        assert not os.path.exists(os.path.join(dump_path, "step0", "rank", "dump_tensor_data"))


def test_tensor_operators_indexing_and_in_place_writes(ms, tmp_path):
    from mindspore import Tensor
    debugger, dump_path = _debugger(tmp_path, task="statistics", level="L1")
    x = Tensor(fixed_input((3, 2)))
    debugger.start()
    head = x[0:2]
    reciprocal = 2.0 / head
    head[0] = 5.0                      # in-place write: still applied, recorded forward only
    debugger.stop()
    debugger.step()
    debugger.close()
    assert float(head.asnumpy()[0, 0]) == 5.0
    np.testing.assert_allclose(reciprocal.asnumpy(), 2.0 / fixed_input((3, 2))[0:2], rtol=1e-6)
    data = load_dump(dump_path)[0]["data"]
    assert data["Tensor.__getitem__.0.forward"]["input_args"][1] == {"type": "slice", "value": [0, 2, None]}
    assert data["Tensor.__rtruediv__.0.forward"]["output"][0]["shape"] == [2, 2]
    assert "Tensor.__setitem__.0.forward" in data


def test_jit_function_backward_under_grad(ms, tmp_path):
    from mindspore import Tensor, mint

    @ms.jit
    def inner(a, b):
        return mint.tanh(mint.matmul(a, b))
    debugger, dump_path = _debugger(tmp_path, task="statistics", level="L1")
    x, w = fixed_input((3, 4), 4), fixed_input((4, 5), 5)
    debugger.start()
    grads = ms.grad(lambda a, b: mint.mean(inner(a, b) * 2), grad_position=(0, 1))(Tensor(x), Tensor(w))
    debugger.stop()
    debugger.step()
    debugger.close()
    back = load_dump(dump_path)[0]["data"]["Jit.inner.0.backward"]
    assert back["input"][0]["shape"] == [3, 5]
    assert back["output"][1]["Norm"] == pytest.approx(np.linalg.norm(grads[1].asnumpy()), rel=1e-5)


def test_jit_cell_construct_is_recorded_by_class_name(ms, tmp_path):
    from mindspore import Tensor, mint, nn

    class Scaler(nn.Cell):
        @ms.jit
        def construct(self, a):
            return mint.sum(a * 3.0)
    debugger, dump_path = _debugger(tmp_path, task="statistics", level="L1")
    x = fixed_input((2, 3))
    net = Scaler()
    debugger.start(net)
    out = net(Tensor(x))
    debugger.stop()
    debugger.step()
    debugger.close()
    assert float(out.asnumpy()) == pytest.approx(float((x * 3).sum()), rel=1e-5)
    data = load_dump(dump_path)[0]["data"]
    assert list(data) == ["Jit.Scaler.0.forward"]
    entry = data["Jit.Scaler.0.forward"]
    assert entry["input_args"][0]["shape"] == [2, 3] and entry["input_args"][0]["Max"] == pytest.approx(x.max())
