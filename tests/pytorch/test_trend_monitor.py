"""trend -i MONITOR_OUTPUT: a real TrainerMon run's csv output in trend.duckdb, values as trained, incremental."""
import json
import os

import duckdb
import pytest
import torch

from msprobe.cli import main
from msprobe.pytorch.monitor import TrainerMon

OPS = ["min", "max", "norm", "mean"]


def _train(model, optimizer, steps, grads, x, y):
    for _ in range(steps):
        loss = (model(x) - y).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        grads.append({name: p.grad.detach().clone() for name, p in model.named_parameters()})
        optimizer.step()


def _stored(out, sql, params=()):
    con = duckdb.connect(str(out / "trend.duckdb"), read_only=True)
    try:
        return con.execute(sql, list(params)).fetchall()
    finally:
        con.close()


def test_monitor_csv_goes_into_the_trend_store_step_by_step(monitor_output, tmp_path):
    config = tmp_path / "monitor_config.json"
    config.write_text(json.dumps({"wg_distribution": True, "xy_distribution": True, "format": "csv", "ops": OPS,
                                  "ndigits": 12, "targets": {"0": {}, "2": {}}}))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    x = torch.randn(32, 8)
    y = x.sum(1, keepdim=True)
    monitor = TrainerMon(str(config), params_have_main_grad=False).set_monitor(model, grad_acc_steps=1,
                                                                                 optimizer=optimizer)
    grads = []
    out = tmp_path / "trend"
    _train(model, optimizer, 2, grads, x, y)
    assert main(["-f", "pytorch", "trend", "-i", str(monitor_output), "-o", str(out)]) == 0
    first = _stored(out, "SELECT step, rank, rows, ingested_at FROM ingested ORDER BY step")
    assert [(s, r) for s, r, _, _ in first] == [(0, 0), (1, 0)] and all(rows > 0 for _, _, rows, _ in first)
    count = _stored(out, "SELECT count(*) FROM stats")[0][0]

    _train(model, optimizer, 2, grads, x, y)  # the job goes on; trend again adds only the new steps
    monitor.remove()
    assert main(["-f", "pytorch", "trend", "-i", str(monitor_output), "-o", str(out)]) == 0
    again = _stored(out, "SELECT step, rank, rows, ingested_at FROM ingested ORDER BY step")
    assert [(s, r) for s, r, _, _ in again] == [(0, 0), (1, 0), (2, 0), (3, 0)] and again[:2] == first
    assert _stored(out, "SELECT count(*) FROM stats WHERE step < 2")[0][0] == count
    assert _stored(out, "SELECT count(*) FROM stats")[0][0] == 2 * count

    source = os.path.abspath(str(monitor_output))
    for step in range(4):  # gradient statistics as torch computes them from the trained model's gradients
        for name, grad in grads[step].items():
            stored = dict(_stored(out, "SELECT stat, value FROM stats WHERE step = ? AND rank = 0 AND source = ? AND "
                                       "tensor = ?", (step, source, f"grad_reduced/{name}")))
            expected = {"min": grad.min().item(), "max": grad.max().item(), "norm": grad.norm().item(),
                        "mean": grad.mean().item()}
            assert stored == pytest.approx(expected, rel=1e-5, abs=1e-9), (step, name)
    roles = {role for (role,) in _stored(out, "SELECT DISTINCT role FROM stats")}
    assert {"grad_reduced", "actv.input", "actv.output", "global"} <= roles
    assert _stored(out, "SELECT count(*) FROM stats WHERE tensor = 'actv/0_0.output' AND stat = 'norm'")[0][0] == 4


def test_dumps_and_monitor_output_share_one_store(monitor_output, tmp_path):
    from msprobe.pytorch import PrecisionDebugger

    config = tmp_path / "monitor_config.json"
    config.write_text(json.dumps({"wg_distribution": True, "format": "csv", "ops": ["norm"]}))
    dump_config = tmp_path / "dump_config.json"
    dump_config.write_text(json.dumps({"task": "statistics", "dump_path": str(tmp_path / "dump"), "level": "L1",
                                       "statistics": {}}))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    monitor = TrainerMon(str(config), params_have_main_grad=False).set_monitor(model, grad_acc_steps=1,
                                                                                 optimizer=optimizer)
    debugger = PrecisionDebugger(config_path=str(dump_config))
    x = torch.randn(8, 4)
    for _ in range(2):
        debugger.start()
        loss = model(x).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        debugger.stop()
        optimizer.step()
        debugger.step()
    debugger.close()
    monitor.remove()
    out = tmp_path / "trend"
    assert main(["-f", "pytorch", "trend", "-i", str(tmp_path / "dump"), "-i", str(monitor_output),
                 "-o", str(out)]) == 0
    sources = _stored(out, "SELECT source, count(DISTINCT step) FROM ingested GROUP BY source ORDER BY source")
    assert sources == sorted([(os.path.abspath(str(tmp_path / "dump")), 2), (os.path.abspath(str(monitor_output)), 2)])
    assert os.path.isfile(out / "trend_heatmap.html")
