"""Run a small network in GRAPH_MODE under an L2 PrecisionDebugger (used by the graph-mode tests).

usage: python ms_graph_script.py CONFIG_JSON SEED STEPS [graph|jit|long]
  graph (default): Dense -> relu -> *2 in GRAPH_MODE.
  jit: the same network called through a @ms.jit function in PyNative.
  long: GRAPH_MODE, the Dense nested in cells with long names (kernel file names pass 255
        characters, so MindSpore renames the files and writes mapping.csv) and a bfloat16 output.
Prints the outputs of the last step as JSON so tests can check the dump against them.
"""
import json
import sys

import numpy as np
import mindspore as ms
from mindspore import Tensor, nn, ops

ms.set_device("CPU")
config_path, seed, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
variant = sys.argv[4] if len(sys.argv) > 4 else "graph"
if variant != "jit":
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


LONG = "a_layer_name_long_enough_to_push_the_kernel_file_name_past_the_limit"


class InnerLayerWithAVeryLongClassNameToo(nn.Cell):
    def __init__(self):
        super().__init__()
        setattr(self, f"projection_{LONG}", nn.Dense(4, 3))

    def construct(self, x):
        return ops.relu(getattr(self, f"projection_{LONG}")(x))


class LongNamedNet(nn.Cell):
    def __init__(self):
        super().__init__()
        setattr(self, f"outer_{LONG}", InnerLayerWithAVeryLongClassNameToo())

    @property
    def fc(self):
        return getattr(getattr(self, f"outer_{LONG}"), f"projection_{LONG}")

    def construct(self, x):
        return (getattr(self, f"outer_{LONG}")(x) * 2).astype(ms.bfloat16)


ms.set_seed(seed)
net = LongNamedNet() if variant == "long" else Net()


@ms.jit
def jit_forward(x):
    return net(x)


x = Tensor(np.random.RandomState(0).randn(2, 4).astype(np.float32))
for _ in range(steps):
    out = jit_forward(x) if variant == "jit" else net(x)
    debugger.step()
debugger.close()
print(json.dumps({"output": out.astype(ms.float32).asnumpy().tolist(), "weight": net.fc.weight.asnumpy().tolist()}))
