"""summary_mode "xor" in MindSpore dumps: the fingerprint of every input, output, parameter and gradient."""
import numpy as np

from ms_test_helpers import fixed_input, load_dump, write_config
from tests.core.dump.test_fingerprint import python_fingerprint


def _debugger(tmp_path, **config):
    from msprobe.mindspore import PrecisionDebugger
    path, dump_path = write_config(tmp_path, **config)
    return PrecisionDebugger(config_path=path), dump_path


def test_l1_xor_is_the_fingerprint_of_the_tensor_bytes(ms, tmp_path):
    from mindspore import Tensor, mint
    debugger, dump_path = _debugger(tmp_path, task="statistics", level="L1", statistics={"summary_mode": "xor"})
    x, w = fixed_input((3, 4), 1), fixed_input((4, 5), 2)
    debugger.start()
    out = mint.matmul(Tensor(x), Tensor(w))
    debugger.stop()
    debugger.step()
    debugger.close()
    call = load_dump(dump_path)[0]["data"]["Mint.matmul.0.forward"]
    assert call["input_args"][0]["xor"] == python_fingerprint(x.tobytes())
    assert call["input_args"][1]["xor"] == python_fingerprint(w.tobytes())
    assert call["output"][0]["xor"] == python_fingerprint(out.asnumpy().tobytes())
    assert "md5" not in call["output"][0] and call["output"][0]["Max"] is not None


def test_bfloat16_is_fingerprinted_bit_for_bit(ms, tmp_path):
    from msprobe.mindspore.dump.adapter import MindSporeAdapter
    from mindspore import Tensor
    values = np.array([1.0, -0.0, 0.0, 3.140625], np.float32)
    tensor = Tensor(values).astype(ms.bfloat16)
    upper_halves = (values.view(np.uint32) >> 16).astype(np.uint16)
    assert MindSporeAdapter().fingerprint(tensor) == python_fingerprint(upper_halves.tobytes())


def test_l0_parameters_and_gradients_are_fingerprinted(ms, tmp_path):
    from ms_models import Net, train_steps
    debugger, dump_path = _debugger(tmp_path, task="statistics", level="L0", statistics={"summary_mode": "xor"})
    net = Net()
    weight_before = net.block.fc.weight.asnumpy().copy()
    (_, grads), = train_steps(debugger, net, fixed_input())
    debugger.close()
    data = load_dump(dump_path)[0]["data"]
    assert data["Cell.block.fc.Dense.forward.0"]["parameters"]["weight"]["xor"] == python_fingerprint(
        weight_before.tobytes())
    grad_by_name = {p.name: g.asnumpy() for p, g in zip(net.trainable_params(), grads)}
    dumped = data["Cell.block.fc.Dense.parameters_grad"]["weight"][0]["xor"]
    assert dumped == python_fingerprint(grad_by_name["block.fc.weight"].tobytes())


def _dropout_run(ms, root, seed, flip=False):
    """mean(dropout(x @ w) * 2) under an L1 xor dump; the global seed set just before."""
    from mindspore import Parameter, Tensor, mint, ops
    from msprobe.mindspore import PrecisionDebugger
    root.mkdir(parents=True, exist_ok=True)
    path, dump_path = write_config(root, task="statistics", level="L1", statistics={"summary_mode": "xor"})
    debugger = PrecisionDebugger(config_path=path)
    x, w = fixed_input((3, 4), 1), fixed_input((4, 5), 2)
    if flip:
        w.view(np.int32)[2, 3] ^= 1 << 7
    weight = Parameter(Tensor(w), name="w")
    ms.manual_seed(seed)
    debugger.start()
    h = mint.matmul(Tensor(x), weight)
    out = ops.dropout(h, p=0.5, training=True)
    mint.mean(out * 2)
    debugger.stop()
    debugger.step()
    debugger.close()
    return dump_path


def test_first_divergence_names_the_dropout_whose_seed_differs(ms, tmp_path):
    from msprobe.core.compare.first_divergence import find_first_divergence
    good, bad = _dropout_run(ms, tmp_path / "a", 3), _dropout_run(ms, tmp_path / "b", 4)
    report = find_first_divergence(str(bad), str(good), str(tmp_path / "out"))
    assert "dropout" in report["call"] and report["class"] == "random"
    data = load_dump(good)[0]["data"]
    assert next(name for name, body in data.items() if "rng" in body) == report["call"]


def test_first_divergence_names_a_flipped_weight_bit_as_the_input_of_the_first_call(ms, tmp_path):
    from msprobe.core.compare.first_divergence import find_first_divergence
    good, bad = _dropout_run(ms, tmp_path / "a", 3), _dropout_run(ms, tmp_path / "b", 3, flip=True)
    report = find_first_divergence(str(bad), str(good), str(tmp_path / "out"))
    assert report["call"] == "Mint.matmul.0.forward" and report["class"] == "input"
    assert report["differing_inputs"] == ["input_args.1"]
    assert report["origins"][0]["call"] == "Mint.matmul.0.forward" and len(report["origins"]) == 1
