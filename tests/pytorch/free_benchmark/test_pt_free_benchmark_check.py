"""free_benchmark check mode on small fp16 models: what is reported, what is not, and training unchanged."""
import math
import os

import pytest
import torch

from fb_helpers import FragileNet, fragile_input, nearly_equal_pair, read_rows, write_config
from msprobe.core.errors import ConfigError
from msprobe.pytorch import PrecisionDebugger


def _run_fragile(tmp_path, section, steps=1, backward=False):
    model = FragileNet()
    debugger = PrecisionDebugger(config_path=write_config(str(tmp_path), section))
    losses = []
    for _ in range(steps):
        x = fragile_input()
        debugger.start()
        loss = model(x)
        if backward:
            loss.float().backward()
        debugger.stop()
        debugger.step()
        losses.append(loss)
    return model, losses


def test_improve_precision_reports_the_long_product_only(tmp_path):
    model, _ = _run_fragile(tmp_path, {"pert_mode": "improve_precision"})
    rows = read_rows(str(tmp_path))
    assert [r["api_name"] for r in rows] == ["Torch.prod.0.forward"]
    row = rows[0]
    assert (row["rank"], row["pert_mode"], row["stage"], row["step"]) == ("0", "improve_precision", "forward", "0")
    assert row["dtype"] == "torch.float16" and row["shape"] == "torch.Size([8, 1])" and row["output_index"] == ""
    # recompute the ratio independently: fp16 prod vs fp32 prod of the same input, magnitudes clamped at 1e-3
    with torch.no_grad():
        factors = 1 + 0.01 * torch.relu(model.lin(fragile_input()))
        low = torch.prod(factors, dim=1, keepdim=True).double()
        high = torch.prod(factors.float(), dim=1, keepdim=True).double()
    quotient = low.abs().clamp(min=1e-3) / high.abs().clamp(min=1e-3)
    expected = max(quotient.max().item(), 1 / quotient.min().item()) - 1
    assert float(row["max_rel"]) == pytest.approx(expected, rel=1e-4)  # the tool compares in float32
    assert expected > 0.005


def test_bit_noise_reports_subtraction_of_nearly_equal_numbers_only(tmp_path):
    a, b = nearly_equal_pair()
    debugger = PrecisionDebugger(config_path=write_config(str(tmp_path), {"pert_mode": "bit_noise"}))
    debugger.start()
    diff = a - b
    scaled = torch.exp(a) * 2
    debugger.stop()
    debugger.step()
    names = [r["api_name"] for r in read_rows(str(tmp_path))]
    assert names == ["Tensor.__sub__.0.forward"]
    assert torch.equal(diff, (a.float() - b.float()).half()) and scaled.dtype == torch.float16


def test_check_mode_leaves_training_bit_identical(tmp_path):
    def train(with_tool):
        torch.manual_seed(3)
        model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, foreach=False)
        section = {"pert_mode": "bit_noise", "fuzz_stage": "forward"}
        debugger = PrecisionDebugger(config_path=write_config(str(tmp_path), section)) if with_tool else None
        losses = []
        for step in range(3):
            x = torch.randn(8, 16, generator=torch.Generator().manual_seed(step))
            if debugger:
                debugger.start()
            loss = model(x).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            if debugger:
                debugger.stop()
                debugger.step()
            losses.append(loss.item())
        return losses, [p.detach().clone() for p in model.parameters()]

    plain_losses, plain_params = train(False)
    tool_losses, tool_params = train(True)
    assert plain_losses == tool_losses
    assert all(torch.equal(a, b) for a, b in zip(plain_params, tool_params))


def test_inplace_optimizer_update_is_rerun_on_its_inputs_before_the_update(tmp_path):
    # no_change: any difference at all is reported. 1.2.1 re-ran Tensor.add_ on the already updated
    # parameter and reported it every step.
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.5, foreach=False)
    section = {"pert_mode": "no_change", "list": ["add_"]}
    debugger = PrecisionDebugger(config_path=write_config(str(tmp_path), section))
    for _ in range(2):
        debugger.start()
        model(torch.randn(4, 8)).sum().backward()
        before = model.weight.detach().clone()
        grad = model.weight.grad.detach().clone()
        opt.step()
        opt.zero_grad()
        debugger.stop()
        debugger.step()
        assert torch.equal(model.weight.detach(), before.add(grad, alpha=-0.5))
    assert read_rows(str(tmp_path)) == []


def test_backward_stage_reports_the_product_gradient(tmp_path):
    _run_fragile(tmp_path, {"pert_mode": "improve_precision", "fuzz_stage": "backward", "list": ["prod"]},
                 backward=True)
    rows = read_rows(str(tmp_path))
    assert rows and {r["api_name"] for r in rows} == {"Torch.prod.0.backward"}
    assert {r["stage"] for r in rows} == {"backward"}
    assert all(float(r["max_rel"]) > 0.002 for r in rows if r["max_rel"] != "symbol_flipping")


def test_backward_stage_keeps_gradients_bit_identical(tmp_path):
    def grads(with_tool):
        model = FragileNet()
        if with_tool:
            section = {"pert_mode": "bit_noise", "fuzz_stage": "backward"}
            debugger = PrecisionDebugger(config_path=write_config(str(tmp_path), section))
            debugger.start()
        model(fragile_input()).float().backward()
        if with_tool:
            debugger.stop()
        return [p.grad.clone() for p in model.parameters()]

    assert all(torch.equal(a, b) for a, b in zip(grads(False), grads(True)))
    assert read_rows(str(tmp_path))  # the backward re-runs did happen


def test_preheat_learns_that_an_exact_subtraction_is_only_sensitive(tmp_path):
    a, b = nearly_equal_pair()
    x = fragile_input()
    section = {"pert_mode": "bit_noise", "if_preheat": True, "preheat_step": 3, "list": ["sub", "prod"]}
    debugger = PrecisionDebugger(config_path=write_config(str(tmp_path), section))
    for _ in range(5):
        debugger.start()
        _ = a - b
        _ = torch.prod(1 + 0.01 * x.float().half(), dim=1)
        debugger.stop()
        debugger.step()
    rows = read_rows(str(tmp_path))
    assert {r["step"] for r in rows} == {"3", "4"}  # nothing during preheat
    assert {r["api_name"] for r in rows} == {"Torch.prod.0.forward"}  # sub is exact: its threshold rose

    # the same without preheat reports both from step 0
    other = tmp_path / "plain"
    other.mkdir()
    debugger = PrecisionDebugger(config_path=write_config(str(other), {"pert_mode": "bit_noise",
                                                                      "list": ["sub", "prod"]}))
    debugger.start()
    _ = a - b
    _ = torch.prod(1 + 0.01 * x.float().half(), dim=1)
    debugger.stop()
    debugger.step()
    assert {r["api_name"] for r in read_rows(str(other))} == {"Tensor.__sub__.0.forward", "Torch.prod.0.forward"}


def test_scope_is_a_set_of_exact_names(tmp_path):
    x = fragile_input()
    section = {"pert_mode": "change_value", "scope": ["Tensor.__mul__.1.forward"]}
    debugger = PrecisionDebugger(config_path=write_config(str(tmp_path), section))
    debugger.start()
    for _ in range(3):
        _ = x * 3
    debugger.stop()
    debugger.step()
    assert [r["api_name"] for r in read_rows(str(tmp_path))] == ["Tensor.__mul__.1.forward"]


def test_to_cpu_on_a_cpu_model_compares_with_float32(tmp_path):
    _run_fragile(tmp_path, {"pert_mode": "to_cpu", "fuzz_device": "cpu"})
    assert [r["api_name"] for r in read_rows(str(tmp_path))] == ["Torch.prod.0.forward"]


@pytest.mark.parametrize("section, words", [
    ({"scope": ["Torch.prod.0.forward"], "list": ["prod"]}, "scope and free_benchmark.list"),
    ({"pert_mode": "to_cpu"}, "'to_cpu' with fuzz_device 'npu'"),
    ({"fuzz_device": "cpu"}, "'improve_precision' with fuzz_device 'cpu'"),
    ({"handler_type": "fix", "pert_mode": "bit_noise"}, "'fix' with pert_mode 'bit_noise'"),
    ({"handler_type": "fix", "fuzz_stage": "backward"}, "'fix' with fuzz_stage 'backward'"),
    ({"handler_type": "fix", "if_preheat": True}, "'fix' with if_preheat true"),
    ({"fuzz_level": "L2"}, "free_benchmark.fuzz_level"),
    ({"max_sample": 0}, "free_benchmark.max_sample"),
])
def test_rules_between_keys_are_one_line_errors(tmp_path, section, words):
    with pytest.raises(ConfigError) as info:
        PrecisionDebugger(config_path=write_config(str(tmp_path), section))
    message = str(info.value)
    assert words in message and "\n" not in message


def test_level_other_than_l1_is_rejected(tmp_path):
    with pytest.raises(ConfigError, match="'L1' for task free_benchmark"):
        PrecisionDebugger(config_path=write_config(str(tmp_path), {}, level="L0"))


def test_rows_are_appended_across_steps_with_one_header(tmp_path):
    _run_fragile(tmp_path, {"pert_mode": "improve_precision"}, steps=3)
    rows = read_rows(str(tmp_path))
    assert [r["step"] for r in rows] == ["0", "1", "2"]
    text = open(os.path.join(str(tmp_path), "out", "free_benchmark.csv")).read()
    assert text.count("rank,pert_mode") == 1
    assert oct(os.stat(os.path.join(str(tmp_path), "out", "free_benchmark.csv")).st_mode & 0o777) == "0o640"
    assert not math.isnan(float(rows[0]["max_rel"]))
