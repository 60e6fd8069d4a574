"""An fp16 network in GRAPH_MODE whose first overflow is a known kernel (Exp), dumped at L2 (task tensor).

usage: python ms_l2_overflow_script.py CONFIG_JSON
  Dense(4,4) -> Mul by 8 -> Exp (overflows: exp(x) > 65504 for x > 11.1) -> Sub (inf - inf = nan) -> ReduceSum
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
        self.fc = nn.Dense(4, 4, weight_init="ones", bias_init="zeros").to_float(ms.float16)

    def construct(self, x):
        big = ops.exp(self.fc(x) * 8)
        return ops.reduce_sum(big - big)


out = Net()(Tensor(np.array([[0.1, 0.2, 0.3, 0.4], [0.5, 0.5, 0.5, 0.5]]), ms.float16))
debugger.step()
debugger.close()
print(out)
