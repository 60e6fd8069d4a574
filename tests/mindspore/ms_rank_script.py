"""One rank of a 2-process MindSpore dump (RANK_ID set by the caller, as msrun sets it).

usage: python ms_rank_script.py CONFIG_JSON
The input is scaled by (rank + 1) so each rank's dump is distinguishable.
"""
import os
import sys

import numpy as np
import mindspore as ms
from mindspore import Tensor, mint

ms.set_device("CPU")
from msprobe.mindspore import PrecisionDebugger  # noqa: E402

rank = int(os.environ["RANK_ID"])
debugger = PrecisionDebugger(config_path=sys.argv[1])
x = Tensor(np.full((2, 3), rank + 1, np.float32))
for _ in range(2):
    debugger.start()
    y = mint.nn.functional.relu(mint.mul(x, 2.0))
    debugger.stop()
    debugger.step()
debugger.close()
