"""MindSpore PyNative: grad_probe summaries and TrainerMon csv recomputed from the network's own tensors."""
import csv
import hashlib
import json
import os

import numpy as np
import pytest

from msprobe.core.config import parse_config
from msprobe.core.monitor.grad_compare import GradComparator


pytestmark = pytest.mark.usefixtures("ms", "monitor_output")


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


def _params(net):
    return {p.name: p.asnumpy().copy() for p in net.trainable_params()}


def _activation_grads(params, x, y):
    """d loss / d (cell output, cell input) of _net by hand (numpy): {cell: (output_grad, input_grad or None)}."""
    relu = lambda v: np.maximum(v, 0)  # noqa: E731
    h0 = x @ params["0.weight"].T + params["0.bias"]
    h2 = relu(h0) @ params["2.weight"].T + params["2.bias"]
    out = relu(h2) @ params["4.weight"].T + params["4.bias"]
    d_out = 2 * (out - y) / out.size
    d_a3 = d_out @ params["4.weight"]
    d_h2 = d_a3 * (h2 > 0)
    d_a1 = d_h2 @ params["2.weight"]
    d_h0 = d_a1 * (h0 > 0)
    return {"4": (d_out, d_a3), "3": (d_a3, d_h2), "2": (d_h2, d_a1), "1": (d_a1, d_h0), "0": (d_h0, None),
            "root": (d_out, None)}


def test_trainer_mon_activation_gradients_recomputed_and_training_unchanged(ms, tmp_path):
    """xy_distribution records cell-output and cell-input gradients (actv_grad) through cell backward hooks,
    recomputed here by hand; training with every monitor switch on is bitwise the training without it, and
    remove() leaves no hook and no wrapped collective behind."""
    from mindspore import mint, nn

    from msprobe.mindspore.monitor import TrainerMon

    originals = {name: getattr(mint.distributed, name) for name in ("all_reduce", "broadcast", "all_gather")}
    net = _net(ms)
    optimizer = nn.Adam(net.trainable_params(), learning_rate=1e-2)
    _train(ms, net, optimizer, 5)
    expected = _params(net)
    cfg = tmp_path / "monitor.json"
    cfg.write_text(json.dumps({"wg_distribution": True, "mv_distribution": True, "param_distribution": True,
                               "xy_distribution": True, "all_xy": True, "ur_distribution": True,
                               "cc_distribution": {"enable": True, "cc_pre_hook": True}, "format": "csv",
                               "ops": ["min", "max", "norm", "mean"], "ndigits": 12}))
    net = _net(ms)
    optimizer = nn.Adam(net.trainable_params(), learning_rate=1e-2)
    before = []
    monitor = TrainerMon(str(cfg)).set_monitor(net, optimizer=optimizer)
    assert mint.distributed.all_reduce is not originals["all_reduce"]  # wrapped while monitoring
    _train(ms, net, optimizer, 5, before_step=lambda step, grads: before.append(_params(net)) or grads)
    monitor.remove()
    assert all(np.array_equal(value, expected[name]) for name, value in _params(net).items())
    assert not any(cell._backward_hook or cell._forward_hook for _, cell in net.cells_and_names())
    assert not optimizer._forward_pre_hook and not optimizer._forward_hook
    assert all(getattr(mint.distributed, name) is original for name, original in originals.items())

    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal((16, 8)).astype(np.float32) for _ in range(5)]
    ops = ["min", "max", "norm", "mean"]
    for step in (0, 3):
        header, rows = _read(os.path.join(monitor.run_dir, f"actv_grad_{step}-{step}.csv"))
        assert header == ["vpp_stage", "module_name", "step"] + [f"{io}.{op}" for io in ("input_grad", "output_grad")
                                                                 for op in ops]
        x = inputs[step]
        grads = _activation_grads(before[step], x, x.sum(1, keepdims=True))
        assert sorted(r[1] for r in rows) == sorted(f"{cell}_0" for cell in grads)
        for row in rows:
            output_grad, input_grad = grads[row[1][:-2]]
            assert [float(v) for v in row[7:]] == pytest.approx(
                [output_grad.min(), output_grad.max(), np.linalg.norm(output_grad), output_grad.mean()],
                rel=1e-5, abs=1e-9)
            if input_grad is None:  # the network input needs no gradient
                assert row[3:7] == ["nan"] * 4
            else:
                assert [float(v) for v in row[3:7]] == pytest.approx(
                    [input_grad.min(), input_grad.max(), np.linalg.norm(input_grad), input_grad.mean()],
                    rel=1e-5, abs=1e-9)
    assert monitor.generate_xy_metrics()[1]["0:4_0/rank0/output_grad"]["norm"] > 0


def test_trainer_mon_activation_gradients_per_micro_batch_and_hooks_dropped_when_done(ms, tmp_path):
    """Two micro-batches before one optimizer call give `{cell}_0` and `{cell}_1` rows; with collect_times 1
    the cell hooks are gone after the collected step; backward_only records no forward activation."""
    from mindspore import nn

    from msprobe.mindspore.monitor import TrainerMon

    cfg = tmp_path / "monitor.json"
    cfg.write_text(json.dumps({"xy_distribution": True, "backward_only": True, "targets": {"4": {}},
                               "format": "csv", "ops": ["norm"], "ndigits": 12, "collect_times": 1}))
    net = _net(ms)
    optimizer = nn.SGD(net.trainable_params(), learning_rate=1e-2)
    monitor = TrainerMon(str(cfg)).set_monitor(net, grad_acc_steps=2, optimizer=optimizer)
    grad_fn = ms.value_and_grad(lambda x, y: ((net(x) - y) ** 2).mean(), None, optimizer.parameters)
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal((16, 8)).astype(np.float32) for _ in range(2)]
    params = _params(net)
    total = None
    for x in xs:
        _, grads = grad_fn(ms.Tensor(x), ms.Tensor(x.sum(1, keepdims=True)))
        total = grads if total is None else tuple(a + b for a, b in zip(total, grads))
    optimizer(total)
    assert not any(cell._backward_hook for _, cell in net.cells_and_names())  # nothing more to collect
    monitor.remove()
    _, rows = _read(os.path.join(monitor.run_dir, "actv_grad_0-0.csv"))
    assert [r[1] for r in rows] == ["4_0", "4_1"]
    for row, x in zip(rows, xs):
        output_grad, input_grad = _activation_grads(params, x, x.sum(1, keepdims=True))["4"]
        assert float(row[3]) == pytest.approx(float(np.linalg.norm(input_grad)), rel=1e-5)
        assert float(row[4]) == pytest.approx(float(np.linalg.norm(output_grad)), rel=1e-5)
    assert not [f for f in os.listdir(monitor.run_dir) if f.startswith("actv_0")]


def test_trainer_mon_print_struct_writes_cell_structure_and_stops(ms, tmp_path, monitor_output):
    from mindspore import nn

    from msprobe.core.errors import MsprobeError
    from msprobe.mindspore.monitor import TrainerMon

    cfg = tmp_path / "monitor.json"
    cfg.write_text(json.dumps({"print_struct": True}))
    net = _net(ms)
    optimizer = nn.SGD(net.trainable_params(), learning_rate=1e-2)
    monitor = TrainerMon(str(cfg)).set_monitor(net, optimizer=optimizer)
    with pytest.raises(MsprobeError, match="print_struct"):
        _train(ms, net, optimizer, 2)
    struct = json.loads((monitor_output / "module_struct.json").read_text())
    assert list(struct) == ["0:0", "0:1", "0:2", "0:3", "0:4", "0:root"]
    assert struct["0:2"]["input"] == {"config": "tuple[1]", "0": "size=(16, 16), dtype=Float32"}
    assert struct["0:4"]["output"] == {"config": "tensor", "tensor": "size=(16, 1), dtype=Float32"}
    assert not any(cell._forward_hook for _, cell in net.cells_and_names())
    assert not optimizer._forward_pre_hook and monitor.session is None
