"""One worker of a real 2-process MindSpore job started by msrun (CPU collectives).

usage: msrun --worker_num=2 --local_worker_num=2 ... ms_msrun_script.py CONFIG_JSON
Each rank starts from (rank + 1); mint.distributed.all_reduce sums them in place.
"""
import sys

import numpy as np
import mindspore as ms
from mindspore import Tensor, mint

ms.set_device("CPU")
from mindspore.communication import get_rank, init  # noqa: E402

init()
from msprobe.mindspore import PrecisionDebugger  # noqa: E402

debugger = PrecisionDebugger(config_path=sys.argv[1])
rank = get_rank()
debugger.start()
values = mint.mul(Tensor(np.full((2, 3), rank + 1, np.float32)), 1.0)
mint.distributed.all_reduce(values)
debugger.stop()
debugger.step()
debugger.close()
print(f"rank {rank}: {values.asnumpy().tolist()}", flush=True)
