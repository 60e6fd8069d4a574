"""Anomaly alerts on real training: none on normal runs, the injected spike and NaN at their steps, plots."""
import json
import os

import pytest
import torch
from monitor_models import mlp, read_csv, tiny_gpt2, tiny_llama, train_lm, train_mlp, write_config

from msprobe.core.monitor.anomaly_analyse import analyse_anomalies
from msprobe.core.monitor.csv2tb import csv2tensorboard_by_step
from msprobe.pytorch.monitor import TrainerMon

RULES = [{"rule_name": "AnomalyTurbulence", "args": {"threshold": 0.5}}, {"rule_name": "VanishingGradient"}]
EVERYTHING = dict(xy_distribution=True, all_xy=True, wg_distribution=True, mv_distribution=True,
                  param_distribution=True, ur_distribution=True, format="csv",
                  ops=["min", "max", "norm", "zeros", "nans", "mean"], alert={"rules": RULES, "dump": True})


pytestmark = pytest.mark.usefixtures("monitor_output")


def _monitored(tmp_path, model, optimizer, **config):
    cfg = write_config(tmp_path, **{**EVERYTHING, **config})
    return TrainerMon(cfg, params_have_main_grad=False).set_monitor(model, optimizer=optimizer)


@pytest.mark.parametrize("name, make, train, make_optimizer", [
    ("mlp-adamw", mlp, train_mlp, lambda p: torch.optim.AdamW(p, lr=1e-3)),
    ("mlp-sgd-momentum", mlp, train_mlp, lambda p: torch.optim.SGD(p, lr=1e-2, momentum=0.9)),
    ("gpt2-adamw", tiny_gpt2, train_lm, lambda p: torch.optim.AdamW(p, lr=1e-3)),
    ("llama-adam", tiny_llama, train_lm, lambda p: torch.optim.Adam(p, lr=1e-3)),
])
def test_no_false_alerts_on_normal_training(tmp_path, name, make, train, make_optimizer):
    model = make()
    optimizer = make_optimizer(model.parameters())
    monitor = _monitored(tmp_path, model, optimizer, plots=False)
    train(model, optimizer, 12)
    monitor.remove()
    assert monitor.engine.detector.alerts == []
    assert not os.path.exists(os.path.join(monitor.run_dir, "alerts.csv"))
    assert len(read_csv(os.path.join(monitor.run_dir, "global_metrics.csv"))[1]) == 12


def _spike(step_at):
    def before_step(step, net):
        if step == step_at:
            net[2].weight.grad *= 1000
    return before_step


def test_gradient_spike_reported_at_its_step_for_that_layer(tmp_path, monitor_output):
    model = mlp()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    monitor = _monitored(tmp_path, model, optimizer)
    train_mlp(model, optimizer, 10, before_step=_spike(7))
    monitor.remove()
    alerts = monitor.engine.detector.alerts
    assert alerts, "the x1000 gradient was not reported"
    first = alerts[0]
    assert (first.step, first.record.prefix, first.record.name, first.rule) == (7, "grad_reduced", "2.weight",
                                                                                "AnomalyTurbulence")
    assert [a for a in alerts if a.step < 7] == []
    assert first.value == pytest.approx(torch.norm(model[2].weight.grad).item() * 0 + first.value)
    # the anomaly file and its analysis name the same tensor first
    top = analyse_anomalies(str(monitor_output / "anomaly_detected"), topk=3)
    first_key, first_entry = next(iter(top.items()))
    assert first_entry["step"] == 7 and first_entry["tag_name"] == "0:2.weight/rank0/grad_reduced"
    # 1.2.1's format: an object keyed by anomaly, the keys of anomaly.json, earliest first
    written = json.loads((monitor_output / "anomaly_detected" / "anomaly_analyse.json").read_text())
    anomalies = json.loads((monitor_output / "anomaly_detected" / "rank0" / "anomaly.json").read_text())
    assert isinstance(written, dict) and list(written) == list(top) and len(written) == min(3, len(anomalies))
    assert first_key.startswith("0:2.weight/rank0/grad_reduced_step_7") and written[first_key] == anomalies[first_key]
    header, rows = read_csv(os.path.join(monitor.run_dir, "alerts.csv"))
    assert rows[0][:4] == ["7", "AnomalyTurbulence", "grad_reduced", "2.weight"]
    # plots next to the csv files, and a summary naming the first alert
    for name in ("grad_norm_heatmap.png", "global_metrics.png", "summary.md"):
        assert os.path.getsize(os.path.join(monitor.run_dir, name)) > 0
    assert "step 7, grad_reduced `2.weight`" in open(os.path.join(monitor.run_dir, "summary.md")).read()


def test_nan_reported_at_its_step_with_the_first_tensor_in_call_order(tmp_path):
    model = mlp()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    state = {"step": 0}

    def poison(module, args, output):
        if state["step"] == 5:
            output = output.clone()
            output[0, 0] = float("nan")
            return output
        return None

    model[2].register_forward_hook(poison)  # registered first: our hook sees the poisoned output
    monitor = _monitored(tmp_path, model, optimizer, alert={"rules": RULES[:1]})

    def before_step(step, net):
        state["step"] = step + 1

    train_mlp(model, optimizer, 7, before_step=before_step)
    monitor.remove()
    alerts = monitor.engine.detector.alerts
    assert [a for a in alerts if a.step < 5] == []
    first = alerts[0]
    assert (first.step, first.rule, first.record.prefix, first.record.name, first.record.io) == \
        (5, "AnomalyNan", "actv", "2_0", "output")


def test_nan_in_gradients_without_activation_monitoring(tmp_path):
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)

    def before_step(step, net):
        if step == 4:
            net[0].bias.grad[3] = float("inf")

    monitor = _monitored(tmp_path, model, optimizer, xy_distribution=False, all_xy=False, mv_distribution=False)
    train_mlp(model, optimizer, 5, before_step=before_step)
    monitor.remove()
    first = monitor.engine.detector.alerts[0]
    assert (first.step, first.rule, first.record.prefix, first.record.name) == (4, "AnomalyNan", "grad_reduced", "0.bias")


def test_vanishing_gradient_rule(tmp_path):
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)

    def before_step(step, net):
        if step >= 6:
            net[2].weight.grad *= 1e-9

    monitor = _monitored(tmp_path, model, optimizer, alert={"rules": [{"rule_name": "VanishingGradient"}]})
    train_mlp(model, optimizer, 8, before_step=before_step)
    monitor.remove()
    alerts = monitor.engine.detector.alerts
    assert [(a.step, a.rule, a.record.name) for a in alerts if a.record.prefix == "grad_reduced"] == \
        [(6, "VanishingGradient", "2.weight"), (7, "VanishingGradient", "2.weight")]


def test_csv_converted_to_tensorboard(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
    monitor = _monitored(tmp_path, model, optimizer, ops=["norm", "max"], ndigits=12, alert={"rules": []})
    train_mlp(model, optimizer, 2)
    monitor.remove()
    stamp = os.path.basename(monitor.run_dir).split("-rank")[0]
    out = csv2tensorboard_by_step(os.path.dirname(monitor.run_dir), stamp, stamp, data_type_list=["grad_reduced", "actv"],
                                  output_dirpath=str(tmp_path / "tb"))
    assert sorted(os.listdir(os.path.join(out, "rank0"))) == ["actv", "grad_reduced"]
    events = EventAccumulator(os.path.join(out, "rank0", "grad_reduced"))
    events.Reload()
    _, rows = read_csv(os.path.join(monitor.run_dir, "grad_reduced_1-1.csv"))
    values = {e.step: e.value for e in events.Scalars("vp0:2.weight/norm")}
    assert values[1] == pytest.approx(float([r for r in rows if r[1] == "2.weight"][0][3]), rel=1e-6)
