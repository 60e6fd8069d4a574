"""append_output: a resumed PyTorch run writes into the earlier run's directory (csv continued, TensorBoard event
file added, anomaly.json kept); no match, another rank's or a linked directory give a new one; bad stamps fail."""
import json
import os
import tempfile

import pytest
import torch
from monitor_models import mlp, read_csv, train_mlp, write_config

from msprobe.core.errors import ConfigError
from msprobe.core.monitor.engine import MonitorEngine
from msprobe.core.monitor.monitor_config import parse_monitor_config
from msprobe.pytorch.monitor import TrainerMon

PARAMS = ["0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"]


pytestmark = pytest.mark.usefixtures("monitor_output")


def _config(tmp_path, **keys):
    return write_config(tempfile.mkdtemp(dir=tmp_path), **keys)


def _grads(store):
    return lambda step, net: store.append({n: p.grad.detach().clone() for n, p in net.named_parameters()})


def _first_run(tmp_path, stamp="Mar15_10-00-00", rank=0, steps=3, before_step=None, **keys):
    """Train `steps` monitored steps, then give the run directory a fixed stamp (an earlier day's run)."""
    keys = {"wg_distribution": True, "param_distribution": True, "format": "csv", "ops": ["norm", "max"],
            "ndigits": 12, **keys}
    model = mlp()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    grads = []

    def record(step, net):
        if before_step is not None:
            before_step(step, net)
        _grads(grads)(step, net)

    monitor = TrainerMon(_config(tmp_path, **keys), params_have_main_grad=False)
    monitor.set_monitor(model, optimizer=optimizer)
    train_mlp(model, optimizer, steps, before_step=record)
    monitor.remove()
    uid = os.path.basename(monitor.run_dir).rsplit("-", 1)[1]
    run_dir = os.path.join(os.path.dirname(monitor.run_dir), f"{stamp}-rank{rank}-{uid}")
    os.rename(monitor.run_dir, run_dir)
    return model, optimizer, grads, run_dir


def _resume(tmp_path, model, optimizer, append, start, steps, before_step=None, **keys):
    """A fresh model and optimizer restored from the checkpoint of the first run, trained `steps` more steps."""
    keys = {"wg_distribution": True, "param_distribution": True, "format": "csv", "ops": ["norm", "max"],
            "ndigits": 12, "append_output": append, **keys}
    restored = mlp(seed=1)
    restored.load_state_dict(model.state_dict())
    restored_optimizer = torch.optim.AdamW(restored.parameters(), lr=1e-2)
    restored_optimizer.load_state_dict(optimizer.state_dict())
    monitor = TrainerMon(_config(tmp_path, **keys), params_have_main_grad=False)
    monitor.set_monitor(restored, optimizer=restored_optimizer, start_iteration=start)
    train_mlp(restored, restored_optimizer, steps, seed=1, before_step=before_step)
    monitor.remove()
    return monitor


def _norms(run_dir, prefix, step):
    header, rows = read_csv(os.path.join(run_dir, f"{prefix}_{step}-{step}.csv"))
    assert header == ["vpp_stage", "param_name", "step", "norm", "max"]
    assert {int(r[2]) for r in rows} == {step}
    return {r[1]: float(r[3]) for r in rows}


def test_resumed_run_continues_in_the_same_directory(tmp_path, monitor_output):
    model, optimizer, first_grads, run_dir = _first_run(tmp_path)
    before = {name: open(os.path.join(run_dir, name), "rb").read() for name in os.listdir(run_dir)}
    second_grads, second_params = [], []

    def record(step, net):
        _grads(second_grads)(step, net)
        second_params.append({n: p.detach().clone() for n, p in net.named_parameters()})

    monitor = _resume(tmp_path, model, optimizer, ["Mar15_09-59-59", "Mar15_10-00-01"], 3, 3, before_step=record)
    assert monitor.run_dir == run_dir and monitor.engine.resumed
    assert os.listdir(monitor_output) == [os.path.basename(run_dir)]  # no new directory
    for name, data in before.items():  # the first run's files are untouched (the plots are redrawn)
        if name.endswith(".csv") and name != "global_metrics.csv":
            assert open(os.path.join(run_dir, name), "rb").read() == data, name
    for step in range(3):
        norms = _norms(run_dir, "grad_reduced", step)
        for name in PARAMS:
            assert norms[name] == pytest.approx(torch.linalg.vector_norm(first_grads[step][name]).item(), rel=1e-6)
    for step in range(3, 6):
        norms = _norms(run_dir, "grad_reduced", step)
        params = _norms(run_dir, "param", step)
        for name in PARAMS:
            grad = second_grads[step - 3][name]
            assert norms[name] == pytest.approx(torch.linalg.vector_norm(grad).item(), rel=1e-6)
            assert params[name] == pytest.approx(torch.linalg.vector_norm(second_params[step - 3][name]).item(),
                                                 rel=1e-6)
    header, rows = read_csv(os.path.join(run_dir, "global_metrics.csv"))
    assert header[0] == "step" and [int(r[0]) for r in rows] == list(range(6))  # one file, continued
    expected = sum(torch.linalg.vector_norm(g).item() ** 2 for g in second_grads[2].values()) ** 0.5
    assert float(rows[5][1]) == pytest.approx(expected, rel=1e-6)


def test_record_window_is_continued_and_other_columns_go_beside_it(tmp_path):
    model, optimizer, first_grads, run_dir = _first_run(tmp_path, step_count_per_record=5)
    old = open(os.path.join(run_dir, "grad_reduced_0-4.csv"), "rb").read()
    grads = []
    _resume(tmp_path, model, optimizer, ["Mar15_10-00-00", "Mar15_10-00-00"], 3, 3, before_step=_grads(grads),
            step_count_per_record=5)
    data = open(os.path.join(run_dir, "grad_reduced_0-4.csv"), "rb").read()
    assert data.startswith(old)  # never truncated: the window's file grows
    header, rows = read_csv(os.path.join(run_dir, "grad_reduced_0-4.csv"))
    assert sorted({int(r[2]) for r in rows}) == [0, 1, 2, 3, 4]
    step4 = {r[1]: float(r[3]) for r in rows if r[2] == "4"}
    assert step4["4.weight"] == pytest.approx(torch.linalg.vector_norm(grads[1]["4.weight"]).item(), rel=1e-6)
    _, rows = read_csv(os.path.join(run_dir, "grad_reduced_5-9.csv"))
    assert {r[2] for r in rows} == {"5"}
    # a third run with other ops: the existing window file keeps its columns, the new rows go beside it
    _resume(tmp_path, model, optimizer, ["Mar15_10-00-00", "Mar15_10-00-00"], 3, 1, step_count_per_record=5,
            ops=["min"])
    assert open(os.path.join(run_dir, "grad_reduced_0-4.csv"), "rb").read() == data
    header, rows = read_csv(os.path.join(run_dir, "grad_reduced_0-4_1.csv"))
    assert header == ["vpp_stage", "param_name", "step", "min"] and {r[2] for r in rows} == {"3"}


def test_range_is_compared_as_dates_and_the_latest_real_directory_of_this_rank_wins(tmp_path, monitor_output):
    _, _, _, march = _first_run(tmp_path, stamp="Mar30_23-00-00")
    root = str(monitor_output)
    for name in ("Apr02_08-00-00-rank0-0000aaaa", "Apr02_09-00-00-rank1-0000bbbb", "Jun01_00-00-00-rank0-0000cccc"):
        os.mkdir(os.path.join(root, name))
    os.symlink(march, os.path.join(root, "Apr20_00-00-00-rank0-0000dddd"))  # newer, but a link: never taken
    # "Apr02" < "Mar01" as strings: a string comparison would keep only the March directory
    cfg = parse_monitor_config({"append_output": ["Mar01_00-00-00", "May01_00-00-00"], "format": "csv"})
    assert MonitorEngine(cfg, rank=0).run_dir == os.path.join(root, "Apr02_08-00-00-rank0-0000aaaa")
    assert MonitorEngine(cfg, rank=1).run_dir == os.path.join(root, "Apr02_09-00-00-rank1-0000bbbb")
    fresh = MonitorEngine(cfg, rank=2)
    assert not fresh.resumed and os.path.dirname(fresh.run_dir) == root and "-rank2-" in fresh.run_dir


def test_no_directory_in_range_or_only_another_ranks_gives_a_new_directory(tmp_path, monitor_output):
    model, optimizer, _, run_dir = _first_run(tmp_path, stamp="Mar15_10-00-00", rank=1)
    before = sorted(os.listdir(run_dir))
    monitor = _resume(tmp_path, model, optimizer, ["Mar15_10-00-00", "Mar15_10-00-00"], 3, 2)  # rank 0 here
    assert not monitor.engine.resumed and monitor.run_dir != run_dir
    assert sorted(os.listdir(run_dir)) == before
    written = os.listdir(monitor.run_dir)
    assert "grad_reduced_3-3.csv" in written and "grad_reduced_0-0.csv" not in written
    later = _resume(tmp_path, model, optimizer, ["Mar15_10-00-01", "Mar16_00-00-00"], 3, 1)
    assert not later.engine.resumed and later.run_dir not in (run_dir, monitor.run_dir)
    assert len(os.listdir(monitor_output)) == 3


def test_tensorboard_adds_an_event_file_and_anomaly_json_keeps_the_first_runs_entries(tmp_path, monitor_output):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    def spike(at):
        def before_step(step, net):
            if step == at:
                net[2].weight.grad *= 1000
        return before_step

    alert = {"rules": [{"rule_name": "AnomalyTurbulence", "args": {"threshold": 0.5}}], "dump": True}
    keys = {"format": "tensorboard", "ops": ["norm"], "alert": alert, "wg_distribution": True,
            "param_distribution": False}
    model, optimizer, _, run_dir = _first_run(tmp_path, steps=10, before_step=spike(7), **keys)
    second = _resume(tmp_path, model, optimizer, ["Mar15_10-00-00", "Mar15_10-00-00"], 10, 8,
                     before_step=spike(7), **keys)
    assert second.run_dir == run_dir
    assert len([n for n in os.listdir(run_dir) if n.startswith("events.out.tfevents")]) >= 2
    events = EventAccumulator(run_dir)
    events.Reload()
    assert [e.step for e in events.Scalars("0:2.weight/rank0/grad_reduced_norm")] == list(range(18))
    entries = json.loads((monitor_output / "anomaly_detected" / "rank0" / "anomaly.json").read_text())
    steps = {entry["step"] for entry in entries.values() if entry["tag_name"] == "0:2.weight/rank0/grad_reduced"}
    assert {7, 17} <= steps


@pytest.mark.parametrize("value, words", [
    (["Dec03_21-34-40"], "append_output"),
    ("Dec03_21-34-40", "append_output"),
    (["Dec03_21-34-40", 5], "append_output"),
    (["Dec3_21-34-40", "Dec03_21-34-42"], "Dec3_21-34-40"),
    (["Dex03_21-34-40", "Dec03_21-34-42"], "Dex03_21-34-40"),
    (["Feb30_00-00-00", "Mar01_00-00-00"], "Feb30_00-00-00"),
    (["Dec03_21-34-40", "Dec03_24-00-00"], "Dec03_24-00-00"),
    (["Dec03_21-34-42", "Dec03_21-34-40"], "after its end"),
    (["Dec03_21-34-40", "Jan01_00-00-00"], "after its end"),
])
def test_bad_append_output_is_a_config_error_at_load(tmp_path, value, words):
    with pytest.raises(ConfigError) as error:
        TrainerMon(write_config(tmp_path, append_output=value), params_have_main_grad=False)
    message = str(error.value)
    assert words in message and "append_output" in message and "\n" not in message


def test_good_stamps_are_accepted_in_any_case_and_empty_means_no_append(tmp_path):
    cfg = parse_monitor_config({"append_output": ["dec03_21-34-40", "DEC03_21-34-40"]})
    assert cfg.append_output == ["dec03_21-34-40", "DEC03_21-34-40"]
    assert parse_monitor_config({"append_output": ["Feb29_00-00-00", "Feb29_23-59-59"]}).append_output
    assert MonitorEngine(parse_monitor_config({}), rank=0).resumed is False
