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
