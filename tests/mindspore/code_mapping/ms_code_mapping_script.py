"""One GRAPH_MODE training step of a small network under an L2 PrecisionDebugger, with the IR saved.

usage: MS_DEV_SAVE_GRAPHS=2 MS_DEV_SAVE_GRAPHS_PATH=DIR python ms_code_mapping_script.py CONFIG_JSON
"""
import sys

import numpy as np
import mindspore as ms
from mindspore import Tensor, nn, ops

ms.set_device("CPU")
ms.set_context(mode=ms.GRAPH_MODE)
from msprobe.mindspore import PrecisionDebugger  # noqa: E402

debugger = PrecisionDebugger(config_path=sys.argv[1])
debugger.start()


class Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc = nn.Dense(4, 3)

    def construct(self, x):
        return ops.relu(self.fc(x)) * 2  # CODE_MAPPING_MARK


model = Net()
train = nn.TrainOneStepCell(nn.WithLossCell(model, nn.MSELoss()), nn.SGD(model.trainable_params(), 0.1))
train(Tensor(np.random.RandomState(0).randn(2, 4).astype(np.float32)), Tensor(np.zeros((2, 3), np.float32)))
debugger.step()
debugger.close()
