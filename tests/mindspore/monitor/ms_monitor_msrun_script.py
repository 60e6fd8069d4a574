"""One worker of a 2-process msrun job for the MindSpore monitor's cc_distribution (CPU collectives).

usage: msrun --worker_num=2 --local_worker_num=2 ... ms_monitor_msrun_script.py CONFIG LOG_ONLY_CONFIG OUT_DIR
Two data-parallel steps of a Dense layer: the gradients are summed with mint.distributed.all_reduce, the
bias gradient gathered, a tensor broadcast from rank 1, and the loss summed from a line that cc_codeline
leaves out. Each rank saves its local gradients (before the reduction) to OUT_DIR/rank{r}.npz. Then a
second monitor with cc_log_only logs one all_reduce and stops at the optimizer step.
"""
import os
import sys

import numpy as np
import mindspore as ms
from mindspore import Tensor, mint, nn

ms.set_device("CPU")
ms.set_context(mode=ms.PYNATIVE_MODE)
from mindspore.communication import get_rank, init  # noqa: E402

init()
from msprobe.core.errors import MsprobeError  # noqa: E402
from msprobe.mindspore.monitor import TrainerMon  # noqa: E402

config, log_only_config, out_dir = sys.argv[1:4]
rank = get_rank()
ms.set_seed(0)
net = nn.Dense(4, 2)
optimizer = nn.SGD(net.trainable_params(), learning_rate=0.1)
original_all_reduce = mint.distributed.all_reduce
monitor = TrainerMon(config).set_monitor(net, optimizer=optimizer)
grad_fn = ms.value_and_grad(lambda x, y: ((net(x) - y) ** 2).mean(), None, optimizer.parameters)
rng = np.random.default_rng(rank)
saved = {}
for step in range(2):
    x = rng.standard_normal((8, 4)).astype(np.float32)
    loss, grads = grad_fn(Tensor(x), Tensor(x[:, :2] * 3))
    for i, grad in enumerate(grads):
        saved[f"step{step}_grad{i}"] = grad.asnumpy().copy()
    for grad in grads:
        mint.distributed.all_reduce(grad)  # cc: recorded
    mint.distributed.all_reduce(loss)
    gathered = [Tensor(np.zeros(2, np.float32)) for _ in range(2)]
    mint.distributed.all_gather(gathered, grads[1])  # cc: recorded
    shifted = Tensor(np.full((3,), rank + 10.0 * step, np.float32))
    mint.distributed.broadcast(shifted, src=1)  # cc: recorded
    optimizer(tuple(grad / 2 for grad in grads))
monitor.remove()
assert mint.distributed.all_reduce is original_all_reduce
np.savez(os.path.join(out_dir, f"rank{rank}.npz"), **saved)

os.environ["MONITOR_OUTPUT_DIR"] = os.path.join(out_dir, "log_only")
monitor = TrainerMon(log_only_config).set_monitor(net, optimizer=optimizer)
_, grads = grad_fn(Tensor(x), Tensor(x[:, :2]))
for grad in grads:
    mint.distributed.all_reduce(grad)
try:
    optimizer(grads)
except MsprobeError as exc:
    print(f"rank {rank} stopped: {exc}", flush=True)
print(f"rank {rank}: restored {mint.distributed.all_reduce is original_all_reduce}", flush=True)
