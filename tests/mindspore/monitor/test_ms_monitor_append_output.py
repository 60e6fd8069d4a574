"""append_output on MindSpore PyNative: a resumed run continues the earlier run's directory, values recomputed."""
import csv
import json
import os

import numpy as np
import pytest


pytestmark = pytest.mark.usefixtures("ms", "monitor_output")


def _net(ms, seed=0):
    from mindspore import nn

    ms.set_seed(seed)
    return nn.SequentialCell(nn.Dense(8, 16), nn.ReLU(), nn.Dense(16, 1))


def _train(ms, net, optimizer, steps, seed):
    """Regression y = sum(x); returns the gradients handed to the optimizer at each step (numpy)."""
    rng = np.random.default_rng(seed)
    loss_fn = lambda x, y: ((net(x) - y) ** 2).mean()  # noqa: E731
    grad_fn = ms.value_and_grad(loss_fn, None, optimizer.parameters)
    seen = []
    for _ in range(steps):
        x = rng.standard_normal((16, 8)).astype(np.float32)
        _, grads = grad_fn(ms.Tensor(x), ms.Tensor(x.sum(1, keepdims=True)))
        seen.append({p.name: g.asnumpy().copy() for p, g in zip(optimizer.parameters, grads)})
        optimizer(grads)
    return seen


def _norms(run_dir, step):
    with open(os.path.join(run_dir, f"grad_reduced_{step}-{step}.csv"), encoding="utf-8", newline="") as handle:
        header, *rows = list(csv.reader(handle))
    assert header == ["vpp_stage", "param_name", "step", "norm"] and {r[2] for r in rows} == {str(step)}
    return {r[1]: float(r[3]) for r in rows}


def test_resumed_mindspore_run_continues_in_the_same_directory(ms, tmp_path, monitor_output):
    from mindspore import nn

    from msprobe.mindspore.monitor import TrainerMon

    keys = {"wg_distribution": True, "format": "csv", "ops": ["norm"], "ndigits": 12, "plots": False}
    (tmp_path / "first.json").write_text(json.dumps(keys))
    net = _net(ms)
    optimizer = nn.SGD(net.trainable_params(), learning_rate=1e-2)
    first = TrainerMon(str(tmp_path / "first.json")).set_monitor(net, optimizer=optimizer)
    first_grads = _train(ms, net, optimizer, 3, seed=0)
    first.remove()
    run_dir = os.path.join(str(monitor_output), "Dec03_21-34-41-rank0-" + first.run_dir.rsplit("-", 1)[1])
    os.rename(first.run_dir, run_dir)  # an earlier run, as 1.2.1's doc example names it

    # resume from the checkpoint: a new network holding the trained weights (SGD keeps no state)
    restored = _net(ms, seed=1)
    for target, source in zip(restored.trainable_params(), net.trainable_params()):
        target.set_data(source.value().copy())
    restored_optimizer = nn.SGD(restored.trainable_params(), learning_rate=1e-2)
    (tmp_path / "second.json").write_text(json.dumps({**keys, "append_output": ["Dec03_21-34-40", "Dec03_21-34-42"]}))
    second = TrainerMon(str(tmp_path / "second.json")).set_monitor(restored, optimizer=restored_optimizer,
                                                                   start_iteration=3)
    second_grads = _train(ms, restored, restored_optimizer, 3, seed=1)
    second.remove()
    assert second.run_dir == run_dir and os.listdir(monitor_output) == [os.path.basename(run_dir)]
    for step, grads in enumerate(first_grads + second_grads):
        norms = _norms(run_dir, step)
        assert sorted(norms) == sorted(grads)
        for name, grad in grads.items():
            assert norms[name] == pytest.approx(float(np.linalg.norm(grad)), rel=1e-5)
    with open(os.path.join(run_dir, "global_metrics.csv"), encoding="utf-8", newline="") as handle:
        assert [row[0] for row in csv.reader(handle)] == ["step", "0", "1", "2", "3", "4", "5"]
