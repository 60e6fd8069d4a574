"""TrainerMon on real PyTorch models: csv / tensorboard / api values recomputed from the model's tensors,
any optimizer, schedule, dynamic switch, print_struct, removal and bit-identical training."""
import json
import math
import os

import pytest
import torch
from monitor_models import mlp, read_csv, train_mlp, write_config

from msprobe.core.errors import ConfigError, MsprobeError
from msprobe.pytorch.monitor import TrainerMon

OPS = ["min", "max", "norm", "zeros", "nans", "mean"]
PARAMS = ["0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"]


pytestmark = pytest.mark.usefixtures("monitor_output")


def _stats(t):
    t = t.detach().float()
    return {"min": t.min().item(), "max": t.max().item(), "norm": torch.linalg.vector_norm(t).item(),
            "zeros": ((t.abs() < 1e-8).sum() / t.numel()).item(), "nans": float(torch.isnan(t).sum()),
            "mean": t.mean().item()}


def _rows(run_dir, prefix, step):
    return read_csv(os.path.join(run_dir, f"{prefix}_{step}-{step}.csv"))


def _check(row_values, header_ops, expected):
    for op, cell in zip(header_ops, row_values):
        assert float(cell) == pytest.approx(expected[op.split(".")[-1]], rel=1e-5, abs=1e-7), op


def test_gradient_optimizer_state_and_parameter_csv_recomputed(tmp_path):
    cfg = write_config(tmp_path, wg_distribution=True, mv_distribution=True, param_distribution=True,
                       format="csv", ops=OPS, ndigits=12)
    model = mlp()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    seen = []

    def before_step(step, net):
        seen.append({name: {"grad": p.grad.clone(), "param": p.detach().clone(),
                            **{k: v.clone() for k, v in optimizer.state.get(p, {}).items() if k != "step"}}
                     for name, p in net.named_parameters()})

    monitor = TrainerMon(cfg, params_have_main_grad=False).set_monitor(model, grad_acc_steps=1, optimizer=optimizer)
    train_mlp(model, optimizer, 3, before_step=before_step)
    monitor.remove()
    run = monitor.run_dir
    for step in range(3):
        for prefix, key in (("grad_reduced", "grad"), ("grad_unreduced", "grad"), ("param", "param"),
                            ("exp_avg", "exp_avg"), ("exp_avg_sq", "exp_avg_sq")):
            if step == 0 and prefix.startswith("exp"):
                assert not os.path.exists(os.path.join(run, f"{prefix}_0-0.csv"))  # no state before the first step
                continue
            header, rows = _rows(run, prefix, step)
            assert header == ["vpp_stage", "param_name", "step"] + OPS
            names = [r[1] for r in rows]
            # grad_unreduced rows come in the order backward produced them (call order)
            assert (names == list(reversed(PARAMS)) if prefix == "grad_unreduced" else names == PARAMS)
            assert {r[2] for r in rows} == {str(step)}
            for row in rows:
                _check(row[3:], OPS, _stats(seen[step][row[1]][key]))
    # m after the first update is 0.1 * g0 (beta1 = 0.9): the state is read before step 1 updates it
    _, rows = _rows(run, "exp_avg", 1)
    assert float(rows[0][5]) == pytest.approx(0.1 * torch.norm(seen[0]["0.weight"]["grad"]).item(), rel=1e-5)
    global_header, global_rows = read_csv(os.path.join(run, "global_metrics.csv"))
    expected = math.sqrt(sum(torch.norm(v["grad"]).item() ** 2 for v in seen[2].values()))
    assert float(global_rows[2][1]) == pytest.approx(expected, rel=1e-5)


def test_activation_csv_recomputed_with_targets_spec(tmp_path):
    cfg = write_config(tmp_path, targets={"2": {"input": "tuple[1]:0", "output": "tensor"}}, xy_distribution=True,
                       format="csv", ops=["min", "max", "norm"], ndigits=12)
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    captured = {}
    model[2].register_forward_hook(lambda m, args, out: captured.update(x=args[0].detach().clone(), y=out.detach().clone()))
    model[2].register_full_backward_hook(lambda m, gin, gout: captured.update(gx=gin[0].clone(), gy=gout[0].clone()))
    monitor = TrainerMon(cfg, params_have_main_grad=False).set_monitor(model, optimizer=optimizer)
    train_mlp(model, optimizer, 1)
    monitor.remove()
    header, rows = _rows(monitor.run_dir, "actv", 0)
    assert header == ["vpp_stage", "module_name", "step", "input.min", "input.max", "input.norm",
                      "output.min", "output.max", "output.norm"]
    assert [r[1] for r in rows] == ["2_0"]
    _check(rows[0][3:6], header[3:6], _stats(captured["x"]))
    _check(rows[0][6:9], header[6:9], _stats(captured["y"]))
    header, rows = _rows(monitor.run_dir, "actv_grad", 0)
    assert header[3:] == ["input_grad.min", "input_grad.max", "input_grad.norm",
                          "output_grad.min", "output_grad.max", "output_grad.norm"]
    _check(rows[0][3:6], header[3:6], _stats(captured["gx"]))
    _check(rows[0][6:9], header[6:9], _stats(captured["gy"]))


@pytest.mark.parametrize("make_optimizer, keys", [
    (lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9), ["momentum_buffer"]),
    (lambda p: torch.optim.Adamax(p, lr=0.01), ["exp_avg", "exp_inf"]),
    (lambda p: torch.optim.RMSprop(p, lr=0.01), ["square_avg"]),
    (lambda p: torch.optim.Adam(p, lr=0.01), ["exp_avg", "exp_avg_sq"]),
])
def test_any_optimizer_states_with_opt_ty_none(tmp_path, make_optimizer, keys):
    cfg = write_config(tmp_path, mv_distribution=True, format="csv", ops=["norm", "max"], ndigits=12)
    model = mlp()
    optimizer = make_optimizer(model.parameters())
    seen = []
    monitor = TrainerMon(cfg, params_have_main_grad=False, opt_ty=None).set_monitor(model, optimizer=optimizer)
    train_mlp(model, optimizer, 3, before_step=lambda s, net: seen.append(
        {n: {k: v.clone() for k, v in optimizer.state.get(p, {}).items()} for n, p in net.named_parameters()}))
    monitor.remove()
    for key in keys:
        header, rows = _rows(monitor.run_dir, key, 2)
        assert [r[1] for r in rows] == PARAMS
        for row in rows:
            state = seen[2][row[1]][key]
            assert float(row[3]) == pytest.approx(torch.norm(state).item(), rel=1e-5)
            assert float(row[4]) == pytest.approx(state.max().item(), rel=1e-5, abs=1e-9)


def test_only_the_given_optimizer_instance_drives_the_steps(tmp_path):
    cfg = write_config(tmp_path, wg_distribution=True, format="csv")
    model, other = mlp(), mlp(seed=1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    other_opt = torch.optim.AdamW(other.parameters(), lr=1e-3)  # same class: 1.2.1 patched the class

    def before_step(step, net):
        other(torch.randn(4, 8)).sum().backward()
        other_opt.step()

    monitor = TrainerMon(cfg, params_have_main_grad=False).set_monitor(model, optimizer=optimizer)
    train_mlp(model, optimizer, 3, before_step=before_step)
    monitor.remove()
    assert sorted(f for f in os.listdir(monitor.run_dir) if f.startswith("grad_reduced")) == \
        ["grad_reduced_0-0.csv", "grad_reduced_1-1.csv", "grad_reduced_2-2.csv"]


def _hook_state(model, optimizer):
    from torch.optim.optimizer import _global_optimizer_post_hooks, _global_optimizer_pre_hooks

    return ([(len(m._forward_hooks), len(m._forward_pre_hooks), len(m._backward_hooks)) for m in model.modules()],
            [bool(getattr(p, "_post_accumulate_grad_hooks", None)) for p in model.parameters()],
            len(optimizer._optimizer_step_pre_hooks), len(optimizer._optimizer_step_post_hooks),
            len(_global_optimizer_pre_hooks), len(_global_optimizer_post_hooks))


@pytest.mark.parametrize("optimizer_given", [True, False])
def test_training_bit_identical_and_nothing_left_after_remove(tmp_path, optimizer_given):
    cfg = write_config(tmp_path, xy_distribution=True, all_xy=True, wg_distribution=True, mv_distribution=True,
                       param_distribution=True, ur_distribution=True, format="csv", ops=OPS,
                       alert={"rules": [{"rule_name": "AnomalyTurbulence", "args": {"threshold": 0.5}}]})

    def run(with_monitor):
        model = mlp()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
        before = _hook_state(model, optimizer)
        monitor = None
        if with_monitor:
            monitor = TrainerMon(cfg, params_have_main_grad=False).set_monitor(
                model, optimizer=optimizer if optimizer_given else None)
        losses = train_mlp(model, optimizer, 4)
        if monitor:
            assert os.path.exists(os.path.join(monitor.run_dir, "grad_reduced_3-3.csv"))
            monitor.remove()
            assert _hook_state(model, optimizer) == before
        return losses, [p.detach().clone() for p in model.parameters()]

    (la, pa), (lb, pb) = run(False), run(True)
    assert la == lb and all(torch.equal(a, b) for a, b in zip(pa, pb))


def test_tensorboard_scalars_read_back(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    cfg = write_config(tmp_path, wg_distribution=True, format="tensorboard", ops=["norm", "max"])
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    grads = []
    monitor = TrainerMon(cfg, params_have_main_grad=False).set_monitor(model, optimizer=optimizer)
    train_mlp(model, optimizer, 2,
              before_step=lambda s, net: grads.append({n: p.grad.clone() for n, p in net.named_parameters()}))
    monitor.remove()
    events = EventAccumulator(monitor.run_dir)
    events.Reload()
    tags = events.Tags()["scalars"]
    assert "0:2.weight/rank0/grad_reduced_norm" in tags and "0:0.bias/rank0/grad_unreduced_max" in tags
    for step in range(2):
        scalars = {e.step: e.value for e in events.Scalars("0:2.weight/rank0/grad_reduced_norm")}
        assert scalars[step] == pytest.approx(torch.norm(grads[step]["2.weight"]).item(), rel=1e-6)
    assert [e.step for e in events.Scalars("global/rank0/grad_norm")] == [0, 1]


def test_api_format_writes_nothing_and_returns_metrics(tmp_path, monitor_output):
    cfg = write_config(tmp_path, wg_distribution=True, xy_distribution=True, format="api", ops=["norm", "min"])
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    monitor = TrainerMon(cfg, params_have_main_grad=False).set_monitor(model, optimizer=optimizer)
    train_mlp(model, optimizer, 1)
    reduced, unreduced = monitor.generate_wgrad_metrics()
    assert reduced["0:4.weight/rank0/grad_reduced"]["norm"] == pytest.approx(torch.norm(model[4].weight.grad).item(), rel=1e-6)
    assert set(unreduced) == {f"0:{n}/rank0/grad_unreduced" for n in PARAMS}
    actv, actv_grad = monitor.generate_xy_metrics()
    assert "0:2_0/rank0/output" in actv and "0:2_0/rank0/output_grad" in actv_grad
    monitor.remove()
    assert not monitor_output.exists() or not any(monitor_output.iterdir())


def test_schedule_start_interval_collect_times(tmp_path):
    cfg = write_config(tmp_path, wg_distribution=True, xy_distribution=True, format="csv",
                       start_step=1, step_interval=2, collect_times=2)
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    monitor = TrainerMon(cfg, params_have_main_grad=False).set_monitor(model, optimizer=optimizer)
    train_mlp(model, optimizer, 6)
    assert monitor.module_session is None  # collection is over: module and gradient hooks are gone
    assert not any(m._forward_hooks for m in model.modules())
    monitor.remove()
    assert sorted(f for f in os.listdir(monitor.run_dir) if f.startswith("grad_reduced")) == \
        ["grad_reduced_1-1.csv", "grad_reduced_3-3.csv"]


def test_step_count_per_record_groups_steps(tmp_path):
    cfg = write_config(tmp_path, wg_distribution=True, format="csv", step_count_per_record=2)
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    monitor = TrainerMon(cfg, params_have_main_grad=False).set_monitor(model, optimizer=optimizer)
    train_mlp(model, optimizer, 3)
    monitor.remove()
    _, rows = read_csv(os.path.join(monitor.run_dir, "grad_reduced_0-1.csv"))
    assert [r[2] for r in rows] == ["0"] * 6 + ["1"] * 6
    assert os.path.exists(os.path.join(monitor.run_dir, "grad_reduced_2-3.csv"))


def test_dynamic_switch_starts_on_the_next_step_and_turns_itself_off(tmp_path, monkeypatch):
    monkeypatch.setenv("DYNAMIC_MONITOR", "True")
    cfg = write_config(tmp_path, wg_distribution=True, format="csv", switch=False, collect_times=2)
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    monitor = TrainerMon(cfg, params_have_main_grad=False).set_monitor(model, optimizer=optimizer)

    def before_step(step, net):
        if step == 1:
            write_config(tmp_path, wg_distribution=True, format="csv", switch=True, collect_times=2)
            stamp = os.path.getmtime(cfg) + 1
            os.utime(cfg, (stamp, stamp))

    train_mlp(model, optimizer, 6, before_step=before_step)
    monitor.remove()
    assert sorted(f for f in os.listdir(monitor.run_dir) if f.startswith("grad_reduced")) == \
        ["grad_reduced_2-2.csv", "grad_reduced_3-3.csv"]
    with open(cfg, encoding="utf-8") as handle:
        assert json.load(handle)["switch"] is False


def test_print_struct_writes_module_struct_and_stops(tmp_path, monitor_output):
    cfg = write_config(tmp_path, print_struct=True)
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    TrainerMon(cfg, params_have_main_grad=False).set_monitor(model, optimizer=optimizer)
    with pytest.raises(MsprobeError, match="print_struct"):
        train_mlp(model, optimizer, 2)
    struct = json.loads((monitor_output / "module_struct.json").read_text())
    assert struct["0:2"]["input"] == {"config": "tuple[1]", "0": "size=(32, 32), dtype=torch.float32"}
    assert struct["0:root"]["output"]["config"] == "tensor"
    assert not any(m._forward_hooks for m in model.modules())


def test_gradient_accumulation_names_micro_steps(tmp_path):
    cfg = write_config(tmp_path, wg_distribution=True, xy_distribution=True, format="csv", ops=["norm"], ndigits=12)
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    monitor = TrainerMon(cfg, params_have_main_grad=False).set_monitor(model, grad_acc_steps=2, optimizer=optimizer)
    x = torch.randn(2, 16, 8)
    optimizer.zero_grad()
    for micro in range(2):
        model(x[micro]).pow(2).mean().backward()
    accumulated = {n: p.grad.clone() for n, p in model.named_parameters()}
    optimizer.step()
    monitor.remove()
    _, rows = _rows(monitor.run_dir, "grad_unreduced", 0)
    assert [r[1] for r in rows] == list(reversed(PARAMS))  # once per step, after the last micro-batch
    for row in rows:
        assert float(row[3]) == pytest.approx(torch.norm(accumulated[row[1]]).item(), rel=1e-6)
    _, rows = _rows(monitor.run_dir, "actv", 0)
    assert [r[1] for r in rows if r[1].startswith("2_")] == ["2_0", "2_1"]


def test_bad_config_and_arguments_are_clear_errors(tmp_path):
    with pytest.raises(ConfigError, match="unknown key"):
        TrainerMon(write_config(tmp_path, wg_distrib=True))
    with pytest.raises(ConfigError, match="format"):
        TrainerMon(write_config(tmp_path, format="xlsx"))
    with pytest.raises(ConfigError, match="opt_ty"):
        TrainerMon(write_config(tmp_path), opt_ty="Stage9")
    with pytest.raises(ConfigError, match="targets"):
        TrainerMon(write_config(tmp_path, targets={"0": {"input": "tuple[2]:5"}}))
    monitor = TrainerMon(write_config(tmp_path, wg_distribution=True))
    with pytest.raises(ConfigError, match="nn.Module"):
        monitor.set_monitor("model")
    monitor.remove()


def test_collectives_on_a_one_rank_group(tmp_path):
    import torch.distributed as dist

    cfg = write_config(tmp_path, cc_distribution={"enable": True, "cc_pre_hook": True}, format="csv",
                       ops=["norm", "max"], ndigits=12)
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    try:
        original = dist.all_reduce
        model = mlp()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        monitor = TrainerMon(cfg, params_have_main_grad=False).set_monitor(model, optimizer=optimizer)
        assert dist.all_reduce is not original

        def before_step(step, net):
            for p in net.parameters():
                dist.all_reduce(p.grad)

        train_mlp(model, optimizer, 1, before_step=before_step)
        monitor.remove()
        assert dist.all_reduce is original
    finally:
        dist.destroy_process_group()
    header, rows = _rows(monitor.run_dir, "other", 0)
    assert header == ["param_name", "step", "norm", "max"]
    names = [r[0] for r in rows]
    assert names[:2] == ["all_reduce.0.pre", "all_reduce.0"] and "all_reduce.5" in names
    assert float(rows[1][2]) == pytest.approx(torch.norm(model[0].weight.grad).item(), rel=1e-6)


def test_nan_counts_are_exact_for_kept_and_transient_tensors(tmp_path):
    cfg = write_config(tmp_path, wg_distribution=True, xy_distribution=True, param_distribution=True, format="csv",
                       ops=["norm", "nans"])
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)  # lr 0: the NaN gradient leaves the weights alone

    def before_step(step, net):
        if step == 1:
            net[2].weight.grad[0, :3] = float("nan")

    model[2].register_forward_hook(lambda m, a, out: out.index_fill_(1, torch.tensor([0, 1]), float("nan"))
                                   if not torch.is_grad_enabled() else None)
    monitor = TrainerMon(cfg, params_have_main_grad=False).set_monitor(model, optimizer=optimizer)
    train_mlp(model, optimizer, 2, before_step=before_step)
    with torch.no_grad():  # a forward without autograd: the hook above writes 2 NaN columns into layer 2's output
        model(torch.randn(5, 8))
    optimizer.step()
    monitor.remove()
    for step, expected in ((0, "0.0"), (1, "3.0")):
        _, rows = _rows(monitor.run_dir, "grad_reduced", step)
        assert {r[1]: r[4] for r in rows}["2.weight"] == expected
    _, rows = _rows(monitor.run_dir, "grad_unreduced", 1)
    assert {r[1]: r[4] for r in rows}["2.weight"] == "0.0"  # taken during backward, before the NaNs
    header, rows = _rows(monitor.run_dir, "actv", 2)
    assert {r[1]: r[6] for r in rows}["2_0"] == "10.0"  # output.nans: 5 rows x 2 columns


class _Float16Wrapper:
    """The attribute layout of Megatron's Float16OptimizerWithFloat16Params: bf16 model parameters,
    fp32 master copies that the inner torch optimizer updates."""

    def __init__(self, model):
        self.float16_groups = [list(model.parameters())]
        self.fp32_from_float16_groups = [[p.detach().float().clone().requires_grad_() for p in model.parameters()]]
        self.optimizer = torch.optim.AdamW(self.fp32_from_float16_groups[0], lr=1e-2)

    def zero_grad(self):
        for p in self.float16_groups[0]:
            p.grad = None

    def step(self):
        for half, master in zip(self.float16_groups[0], self.fp32_from_float16_groups[0]):
            master.grad = half.grad.float()
        self.optimizer.step()
        with torch.no_grad():
            for half, master in zip(self.float16_groups[0], self.fp32_from_float16_groups[0]):
                half.copy_(master)


def test_mixed_precision_wrapper_states_come_from_the_master_copies(tmp_path):
    cfg = write_config(tmp_path, mv_distribution=True, wg_distribution=True, format="csv", ops=["norm"], ndigits=12)
    model = mlp().to(torch.bfloat16)
    wrapper = _Float16Wrapper(model)
    monitor = TrainerMon(cfg, params_have_main_grad=False, opt_ty="Megatron_Float16OptimizerWithFloat16Params")
    monitor.set_wrapped_optimizer(wrapper)
    monitor.set_monitor(model, optimizer=wrapper)
    x = torch.randn(16, 8, dtype=torch.bfloat16)
    seen = []
    for _ in range(3):
        wrapper.zero_grad()
        model(x).float().pow(2).mean().backward()
        seen.append({i: wrapper.optimizer.state.get(m, {}).get("exp_avg") for i, m in
                     enumerate(wrapper.fp32_from_float16_groups[0])})
        seen[-1] = {k: (v.clone() if v is not None else None) for k, v in seen[-1].items()}
        wrapper.step()
    monitor.remove()
    TrainerMon.set_wrapped_optimizer(None)
    _, rows = _rows(monitor.run_dir, "exp_avg", 2)
    assert [r[1] for r in rows] == PARAMS
    for i, row in enumerate(rows):
        assert float(row[3]) == pytest.approx(torch.norm(seen[2][i]).item(), rel=1e-6)
    _, rows = _rows(monitor.run_dir, "grad_reduced", 2)
    assert len(rows) == 6
