"""The advisor names a MindSpore cell's differing parameter, not the block around it (issue 20, finding
4): a PyNative net of two blocks, each an RMSNorm (mint ops) and a mint Linear; the second block's norm
weight is scaled by 1.02 on the NPU side."""
import os

import numpy as np

from ms_test_helpers import fixed_input, write_config


def _net(scale):
    from mindspore import Parameter, Tensor, mint, nn

    class RMSNorm(nn.Cell):
        def __init__(self, weight):
            super().__init__()
            self.weight = Parameter(Tensor(weight), name="weight")

        def construct(self, x):
            return x * mint.rsqrt(mint.mean(x * x, -1, keepdim=True) + 1e-6) * self.weight

    class Block(nn.Cell):
        def __init__(self, index, norm_scale):
            super().__init__()
            rng = np.random.default_rng(index)
            self.n2 = RMSNorm((1.0 + 0.1 * rng.standard_normal(8)).astype(np.float32) * norm_scale)
            self.fc = mint.nn.Linear(8, 8)
            self.fc.weight.set_data(Tensor((0.3 * rng.standard_normal((8, 8))).astype(np.float32)))
            self.fc.bias.set_data(Tensor(np.zeros(8, np.float32)))

        def construct(self, x):
            return x + self.fc(self.n2(x))

    class TwoBlocks(nn.Cell):
        def __init__(self):
            super().__init__()
            self.b1, self.b2 = Block(1, 1.0), Block(2, scale)

        def construct(self, x):
            return self.b2(self.b1(x))
    return TwoBlocks()


def _dump(ms, directory, net, task):
    from mindspore import Tensor, mint
    from msprobe.mindspore import PrecisionDebugger

    os.makedirs(directory, exist_ok=True)
    path, dump_path = write_config(directory, task=task, level="mix")
    debugger = PrecisionDebugger(config_path=path)
    grad_fn = ms.value_and_grad(lambda x: mint.mean(mint.square(net(x))), None, net.trainable_params())
    debugger.start(net)
    grad_fn(Tensor(fixed_input((4, 8), 3)))
    debugger.stop()
    debugger.step()
    debugger.close()
    return os.path.join(dump_path, "step0", "rank", "dump.json")


def test_scaled_norm_weight_in_a_block_is_named_as_the_parameter(ms, tmp_path):
    from msprobe.core.compare import CompareOptions, compare_tables
    from msprobe.core.io.load import load_dump

    for task in ("statistics", "tensor"):
        npu = _dump(ms, tmp_path / f"npu_{task}", _net(1.02), task)
        bench = _dump(ms, tmp_path / f"bench_{task}", _net(1.0), task)
        records = compare_tables(load_dump(npu), load_dump(bench), CompareOptions(progress=False))
        assert records.suspect is not None, task
        assert records.suspect.name == "Cell.b2.n2.RMSNorm.forward.0.parameters.weight", (task, records.suspect.summary)
