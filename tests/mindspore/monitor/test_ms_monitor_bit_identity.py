"""Training under the MindSpore TrainerMon is bit-identical to training without it (issue 20): activation
gradients (xy_distribution) are read by tensor hooks, not by `Cell.register_backward_hook`, whose
CellBackwardHook node changed the order MindSpore sums a shared input's gradients in (9 of 20 step-0
gradients of this attention model moved, up to 3e-8)."""
import csv
import json
import os

import numpy as np
import pytest

pytestmark = pytest.mark.usefixtures("ms", "monitor_output")


class _HandSGD:
    """A MindSpore optimizer Cell updating in float32 (nn.SGD has no bfloat16 CPU kernel)."""

    @staticmethod
    def build(params, lr=0.1):
        import mindspore as ms
        from mindspore import ParameterTuple, nn

        class HandSGD(nn.Cell):
            def __init__(self):
                super().__init__()
                self.parameters = ParameterTuple(params)

            def construct(self, grads):
                for param, grad in zip(self.parameters, grads):
                    param.set_data((param.astype(ms.float32) - lr * grad.astype(ms.float32)).astype(param.dtype))
                return True
        return HandSGD()


def _train(ms, dtype, config=None, tmp_path=None, steps=2):
    """Train the two-block attention model `steps` steps; returns (gradients per step, final parameters,
    network outputs per step) as float32 numpy arrays, and the monitor's run directory."""
    from mindspore import Tensor, mint

    from ms_models import TinyAttentionModel
    from msprobe.mindspore.monitor import TrainerMon

    net = TinyAttentionModel(dtype=getattr(ms, dtype))
    x = Tensor(np.random.RandomState(1).randn(2, 5, 16).astype(np.float32)).astype(getattr(ms, dtype))
    optimizer = _HandSGD.build(net.trainable_params())
    monitor = None
    if config is not None:
        path = tmp_path / "monitor.json"
        path.write_text(json.dumps(config))
        monitor = TrainerMon(str(path)).set_monitor(net, optimizer=optimizer)
    outputs = []

    def loss_fn(data):
        out = net(data).astype(ms.float32)
        outputs.append(out.asnumpy().copy())
        return mint.mean(mint.square(out))
    grad_fn = ms.value_and_grad(loss_fn, None, optimizer.parameters)
    grads_per_step = []
    for _ in range(steps):
        _, grads = grad_fn(x)
        grads_per_step.append([g.astype(ms.float32).asnumpy() for g in grads])
        optimizer(grads)
    if monitor is not None:
        monitor.remove()
    params = [p.astype(ms.float32).asnumpy() for p in optimizer.parameters]
    return grads_per_step, params, outputs, monitor.run_dir if monitor else None


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_training_with_trainer_mon_activation_gradients_is_bit_identical(ms, tmp_path, dtype):
    plain_grads, plain_params, _, _ = _train(ms, dtype)
    config = {"xy_distribution": True, "all_xy": True, "wg_distribution": True, "param_distribution": True,
              "squash_name": True, "format": "csv", "ops": ["norm", "max"], "ndigits": 12}
    grads, params, outputs, run_dir = _train(ms, dtype, config, tmp_path)
    for step, (want, got) in enumerate(zip(plain_grads, grads)):
        differ = [i for i, (a, b) in enumerate(zip(want, got)) if a.tobytes() != b.tobytes()]
        assert not differ, f"step {step}: {len(differ)} of {len(want)} gradients differ"
    assert all(a.tobytes() == b.tobytes() for a, b in zip(plain_params, params))
    # the gradients were still recorded: the head's output gradient is d mean(out^2) / d out = 2 out / n
    with open(os.path.join(run_dir, "actv_grad_1-1.csv"), newline="") as handle:
        rows = list(csv.reader(handle))
    header, rows = rows[0], {row[1]: row for row in rows[1:]}
    assert {"0_0", "1_0", "head_0", "0.norm_0"} <= set(rows)
    out = outputs[1]
    want = np.linalg.norm(2 * out / out.size)
    got = float(rows["head_0"][header.index("output_grad.norm")])
    assert got == pytest.approx(float(want), rel=1e-2 if dtype == "bfloat16" else 1e-5)
    # layer 1's input gradient is layer 0's output gradient (its only consumer is layer 1)
    assert rows["1_0"][header.index("input_grad.norm")] == rows["0_0"][header.index("output_grad.norm")]
