"""Run a small network in GRAPH_MODE under an L2 PrecisionDebugger (used by the graph-mode tests).

usage: python ms_graph_script.py CONFIG_JSON SEED STEPS [jit]
  jit: PyNative with a @ms.jit function instead of GRAPH_MODE.
Prints the outputs of the last step as JSON so tests can check the dump against them.
"""
import json
import sys

import numpy as np
import mindspore as ms
from mindspore import Tensor, nn, ops

ms.set_device("CPU")
config_path, seed, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
use_jit = len(sys.argv) > 4 and sys.argv[4] == "jit"
if not use_jit:
    ms.set_context(mode=ms.GRAPH_MODE)
from msprobe.mindspore import PrecisionDebugger  # noqa: E402

debugger = PrecisionDebugger(config_path=config_path)
debugger.start()


class Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc = nn.Dense(4, 3)

    def construct(self, x):
        return ops.relu(self.fc(x)) * 2


ms.set_seed(seed)
net = Net()


@ms.jit
def jit_forward(x):
    return net(x)


x = Tensor(np.random.RandomState(0).randn(2, 4).astype(np.float32))
for _ in range(steps):
    out = jit_forward(x) if use_jit else net(x)
    debugger.step()
debugger.close()
print(json.dumps({"output": out.asnumpy().tolist(), "weight": net.fc.weight.asnumpy().tolist()}))
