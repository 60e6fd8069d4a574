"""MindSpore PyNative: grad_probe summaries and TrainerMon csv recomputed from the network's own tensors."""
import csv
import hashlib
import json
import os

import numpy as np
import pytest

from msprobe.core.config import parse_config
from msprobe.core.monitor.grad_compare import GradComparator


@pytest.fixture(autouse=True)
def monitor_output(tmp_path, monkeypatch, ms):
    monkeypatch.setenv("MONITOR_OUTPUT_DIR", str(tmp_path / "monitor_output"))
    monkeypatch.delenv("DYNAMIC_MONITOR", raising=False)
    return tmp_path / "monitor_output"


def _net(ms, seed=0):
    from mindspore import nn

    ms.set_seed(seed)
    return nn.SequentialCell(nn.Dense(8, 16), nn.ReLU(), nn.Dense(16, 16), nn.ReLU(), nn.Dense(16, 1))


def _train(ms, net, optimizer, steps, before_step=None, seed=0):
    """Regression y = sum(x); returns the gradients handed to the optimizer at each step (numpy)."""
    rng = np.random.default_rng(seed)
    loss_fn = lambda x, y: ((net(x) - y) ** 2).mean()  # noqa: E731
    grad_fn = ms.value_and_grad(loss_fn, None, optimizer.parameters)
    seen = []
    for step in range(steps):
        x = rng.standard_normal((16, 8)).astype(np.float32)
        _, grads = grad_fn(ms.Tensor(x), ms.Tensor(x.sum(1, keepdims=True)))
        if before_step is not None:
            grads = before_step(step, grads)
        seen.append({p.name: g.asnumpy().copy() for p, g in zip(optimizer.parameters, grads)})
        optimizer(grads)
    return seen


def _read(path, bom=False):
    with open(path, encoding="utf-8-sig" if bom else "utf-8", newline="") as handle:
        rows = list(csv.reader(handle))
    return rows[0], rows[1:]


def _grad_config(path, level):
    return parse_config({"task": "grad_probe", "dump_path": str(path),
                         "grad_probe": {"grad_level": level, "bounds": [-0.01, 0, 0.01]}})


def test_grad_probe_l2_and_l0_recomputed(ms, tmp_path):
    from mindspore import nn

    from msprobe.mindspore.monitor.grad_probe import GradProbe

    net = _net(ms)
    optimizer = nn.Adam(net.trainable_params(), learning_rate=1e-3)
    probe = GradProbe(_grad_config(tmp_path / "l2", "L2")).monitor(optimizer)
    seen = _train(ms, net, optimizer, 2)
    probe.stop()
    header, rows = _read(tmp_path / "l2" / "rank0" / "grad_summary_1.csv", bom=True)
    assert header[1:6] == ["(-inf, -0.01]", "(-0.01, 0]", "(0, 0.01]", "(0.01, inf)", "=0"]
    assert [r[0] for r in rows] == ["0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"]
    for row in rows:
        g = seen[1][row[0]]
        expected = [(g <= -0.01).mean(), ((g > -0.01) & (g <= 0)).mean(), ((g > 0) & (g <= 0.01)).mean(),
                    (g > 0.01).mean(), (g == 0).mean()]
        assert [float(v) for v in row[1:6]] == pytest.approx(expected, abs=1e-12)
        assert float(row[6]) == g.max() and float(row[7]) == g.min()
        assert float(row[8]) == pytest.approx(float(np.linalg.norm(g)), rel=1e-5)
        assert row[9] == str(list(g.shape))
        direction = np.load(tmp_path / "l2" / "rank0" / "step1" / f"{row[0]}.npy", allow_pickle=False)
        assert np.array_equal(direction, g > 0)
    net = _net(ms)
    optimizer = nn.Adam(net.trainable_params(), learning_rate=1e-3)
    probe = GradProbe(_grad_config(tmp_path / "l0", "L0")).monitor(optimizer)
    seen = _train(ms, net, optimizer, 1)
    probe.stop()
    header, rows = _read(tmp_path / "l0" / "rank0" / "grad_summary_0.csv", bom=True)
    assert header == ["param_name", "MD5", "max", "min", "norm", "shape"]
    assert rows[0][1] == hashlib.md5(seen[0]["0.weight"].astype(np.float32).tobytes()).hexdigest()
    assert not optimizer._forward_pre_hook


def test_grad_probe_compare_finds_the_changed_step(ms, tmp_path):
    from mindspore import nn

    from msprobe.mindspore.monitor.grad_probe import GradProbe

    def run(path, flip):
        net = _net(ms)
        optimizer = nn.SGD(net.trainable_params(), learning_rate=1e-2)
        probe = GradProbe(_grad_config(path, "L1")).monitor(optimizer)

        def before_step(step, grads):
            return tuple(-g for g in grads[:1]) + tuple(grads[1:]) if flip and step >= 2 else grads

        _train(ms, net, optimizer, 4, before_step=before_step)
        probe.stop()

    run(tmp_path / "a", False)
    run(tmp_path / "b", True)
    outcome = GradComparator.compare_distributed(str(tmp_path / "a"), str(tmp_path / "b"), str(tmp_path / "o"))[0]
    assert outcome.first_divergent["0.weight"] == 2 and outcome.values["0.weight"][:2] == [1.0, 1.0]


def test_trainer_mon_csv_recomputed_and_hooks_removed(ms, tmp_path):
    from mindspore import nn

    from msprobe.mindspore.monitor import TrainerMon

    cfg = tmp_path / "monitor.json"
    cfg.write_text(json.dumps({"wg_distribution": True, "mv_distribution": True, "param_distribution": True,
                               "xy_distribution": True, "all_xy": True, "ur_distribution": True, "format": "csv",
                               "ops": ["min", "max", "norm", "mean"], "ndigits": 12,
                               "alert": {"rules": [{"rule_name": "AnomalyTurbulence", "args": {"threshold": 0.5}}]}}))
    net = _net(ms)
    optimizer = nn.Adam(net.trainable_params(), learning_rate=1e-2)
    states = []

    def before_step(step, grads):
        states.append({p.name: (p.asnumpy().copy(), m1.asnumpy().copy(), m2.asnumpy().copy())
                       for p, m1, m2 in zip(optimizer.parameters, optimizer.moment1, optimizer.moment2)})
        return grads

    monitor = TrainerMon(str(cfg)).set_monitor(net, optimizer=optimizer)
    seen = _train(ms, net, optimizer, 10, before_step=before_step)
    monitor.remove()
    assert monitor.engine.detector.alerts == []  # normal training: no alert
    run = monitor.run_dir
    ops = ["min", "max", "norm", "mean"]

    def stats(a):
        return [a.min(), a.max(), np.linalg.norm(a), a.mean()]

    for prefix, pick in (("grad_reduced", lambda s, n: seen[s][n]), ("param", lambda s, n: states[s][n][0]),
                         ("exp_avg", lambda s, n: states[s][n][1]), ("exp_avg_sq", lambda s, n: states[s][n][2])):
        header, rows = _read(os.path.join(run, f"{prefix}_2-2.csv"))
        assert header == ["vpp_stage", "param_name", "step"] + ops
        for row in rows:
            assert [float(v) for v in row[3:]] == pytest.approx(stats(pick(2, row[1])), rel=1e-5, abs=1e-8)
    assert not os.path.exists(os.path.join(run, "exp_avg_0-0.csv"))  # no moments before the first update
    header, rows = _read(os.path.join(run, "actv_0-0.csv"))
    assert header[3:] == [f"{io}.{op}" for io in ("input", "output") for op in ops]
    assert [r[1] for r in rows][:3] == ["0_0", "1_0", "2_0"] and rows[-1][1] == "root_0"
    _, rows = _read(os.path.join(run, "update_1-1.csv"))
    delta = states[2]["0.weight"][0] - states[1]["0.weight"][0]
    assert float(rows[0][5]) == pytest.approx(float(np.linalg.norm(delta)), rel=1e-4)
    assert float(rows[0][-1]) == pytest.approx(float(np.linalg.norm(delta) / np.linalg.norm(states[1]["0.weight"][0])),
                                               rel=1e-4)
    assert os.path.getsize(os.path.join(run, "grad_norm_heatmap.png")) > 0
    assert not optimizer._forward_pre_hook and not optimizer._forward_hook
    assert not any(cell._forward_hook for _, cell in net.cells_and_names())


def test_trainer_mon_reports_spike_and_nan_at_their_steps(ms, tmp_path):
    from mindspore import nn

    from msprobe.mindspore.monitor import TrainerMon

    cfg = tmp_path / "monitor.json"
    cfg.write_text(json.dumps({"wg_distribution": True, "format": "csv", "ops": ["norm", "nans"],
                               "alert": {"rules": [{"rule_name": "AnomalyTurbulence", "args": {"threshold": 0.5}}]}}))
    net = _net(ms)
    optimizer = nn.SGD(net.trainable_params(), learning_rate=1e-3)

    def before_step(step, grads):
        grads = list(grads)
        if step == 6:
            grads[2] = grads[2] * 1000
        if step == 9:
            grads[4] = grads[4] * float("nan")
        return tuple(grads)

    monitor = TrainerMon(str(cfg)).set_monitor(net, optimizer=optimizer)
    _train(ms, net, optimizer, 10, before_step=before_step)
    monitor.remove()
    alerts = [(a.step, a.rule, a.record.name) for a in monitor.engine.detector.alerts]
    assert alerts[0] == (6, "AnomalyTurbulence", "2.weight")
    assert (9, "AnomalyNan", "4.weight") in alerts and [a for a in alerts if a[0] < 6] == []


def test_precision_debugger_monitor_runs_grad_probe(ms, tmp_path):
    """The documented form: PrecisionDebugger(task grad_probe).monitor(optimizer); start/step are no-ops."""
    import json

    from mindspore import nn

    from msprobe.mindspore import PrecisionDebugger

    config = tmp_path / "config.json"
    config.write_text(json.dumps({"task": "grad_probe", "dump_path": str(tmp_path / "dump"),
                                  "grad_probe": {"grad_level": "L1"}}))
    net = _net(ms)
    optimizer = nn.Adam(net.trainable_params(), learning_rate=1e-3)
    debugger = PrecisionDebugger(str(config))
    debugger.monitor(optimizer)
    debugger.start(net)
    seen = _train(ms, net, optimizer, 2)
    debugger.step()
    debugger.stop()
    header, rows = _read(tmp_path / "dump" / "rank0" / "grad_summary_1.csv", bom=True)
    assert [r[0] for r in rows] == list(seen[1])
