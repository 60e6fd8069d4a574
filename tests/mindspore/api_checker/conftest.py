"""Dumps of a real mint model recorded with msprobe's MindSpore PrecisionDebugger (L1), once per session."""
import os

import numpy as np
import pytest


def _build_net():
    import mindspore as ms
    from mindspore import Parameter, Tensor, mint, nn

    class MintNet(nn.Cell):
        """matmul -> relu -> tanh -> mul -> add -> matmul -> softmax -> exp -> mean, all in float32."""

        def __init__(self):
            super().__init__()
            rng = np.random.RandomState(0)
            self.w1 = Parameter(Tensor(rng.randn(16, 32).astype(np.float32) * 0.3), name="w1")
            self.w2 = Parameter(Tensor(rng.randn(32, 8).astype(np.float32) * 0.3), name="w2")

        def construct(self, x):
            hidden = mint.tanh(mint.nn.functional.relu(mint.matmul(x, self.w1)))
            hidden = mint.add(hidden * 2.0, 0.5)
            out = mint.nn.functional.softmax(mint.matmul(hidden, self.w2), dim=-1)
            return mint.mean(mint.exp(out))

    from ms_runtime import mindspore_on_cpu

    mindspore_on_cpu()
    ms.runtime.launch_blocking()
    return MintNet()


def record_ms_dump(out_dir, task):
    import mindspore as ms
    from mindspore import Tensor

    from msprobe.mindspore import PrecisionDebugger

    net = _build_net()
    debugger = PrecisionDebugger(task=task, dump_path=str(out_dir), level="L1")
    x = Tensor(np.random.RandomState(1).randn(8, 16).astype(np.float32))
    grad_fn = ms.value_and_grad(net, 0, net.trainable_params())
    debugger.start()
    grad_fn(x)
    debugger.stop()
    if hasattr(debugger, "close"):
        debugger.close()
    path = os.path.join(str(out_dir), "step0", "rank", "dump.json")
    assert os.path.isfile(path), os.listdir(str(out_dir))
    return path


@pytest.fixture(scope="session")
def ms_statistics_dump(tmp_path_factory):
    return record_ms_dump(tmp_path_factory.mktemp("ms_stat"), "statistics")


@pytest.fixture(scope="session")
def ms_tensor_dump(tmp_path_factory):
    return record_ms_dump(tmp_path_factory.mktemp("ms_tensor"), "tensor")
