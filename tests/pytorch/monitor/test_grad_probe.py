"""grad_probe on real PyTorch models: every number in the summaries recomputed from the gradients."""
import csv
import hashlib
import json
import os

import numpy as np
import pytest
import torch
from monitor_models import mlp, train_mlp

from msprobe.core.config import parse_config
from msprobe.core.errors import CompareError
from msprobe.core.monitor.grad_compare import GradComparator
from msprobe.pytorch.monitor.grad_probe import GradProbe

BOUNDS = [-0.01, 0, 0.01]


def _config(path, level="L2", param_list=(), **top):
    return parse_config({"task": "grad_probe", "dump_path": str(path), **top,
                         "grad_probe": {"grad_level": level, "param_list": list(param_list), "bounds": BOUNDS}})


def _read(path):
    with open(path, "rb") as handle:
        raw = handle.read()
    assert raw.startswith(b"\xef\xbb\xbf") and b"\r\n" in raw  # BOM + CRLF like 1.2.1
    rows = list(csv.reader(raw.decode("utf-8-sig").splitlines()))
    return rows[0], rows[1:]


def _train_capturing(dump_path, level="L2", steps=3, flip_from=None, **top):
    """Train an MLP under grad_probe; returns the gradients each step used (copied before the step)."""
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    seen = []

    def before_step(step, net):
        if flip_from is not None and step >= flip_from:
            grad = net[0].weight.grad
            grad[: grad.shape[0] // 2] *= -1  # half of one weight's gradient points the other way
        seen.append({n: p.grad.detach().clone() for n, p in net.named_parameters()})

    probe = GradProbe(_config(dump_path, level, **top)).monitor(model)
    train_mlp(model, optimizer, steps, before_step=before_step)
    probe.stop()
    return seen


def test_l2_summary_recomputed_from_gradients(tmp_path):
    grads = _train_capturing(tmp_path, "L2", steps=3)
    rank_dir = tmp_path / "rank0"
    for step, step_grads in enumerate(grads):
        header, rows = _read(rank_dir / f"grad_summary_{step}.csv")
        assert header == ["param_name", "(-inf, -0.01]", "(-0.01, 0]", "(0, 0.01]", "(0.01, inf)", "=0",
                          "max", "min", "norm", "shape"]
        assert [r[0] for r in rows] == ["0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"]
        for row in rows:
            g = step_grads[row[0]]
            n = g.numel()
            expected = [(g <= -0.01).sum() / n, ((g > -0.01) & (g <= 0)).sum() / n, ((g > 0) & (g <= 0.01)).sum() / n,
                        (g > 0.01).sum() / n, (g == 0).sum() / n]
            assert [float(x) for x in row[1:6]] == pytest.approx([float(e) for e in expected], abs=0)
            assert float(row[6]) == g.max().item() and float(row[7]) == g.min().item()
            assert float(row[8]) == pytest.approx(torch.norm(g).item(), rel=1e-6)
            assert row[9] == str(list(g.shape))
            direction = np.load(rank_dir / f"step{step}" / f"{row[0]}.npy", allow_pickle=False)
            assert direction.dtype == np.bool_ and np.array_equal(direction, (g > 0).numpy())


def test_l0_has_md5_and_no_direction_files(tmp_path):
    grads = _train_capturing(tmp_path, "L0", steps=2)
    header, rows = _read(tmp_path / "rank0" / "grad_summary_1.csv")
    assert header == ["param_name", "MD5", "max", "min", "norm", "shape"]
    for row in rows:
        assert row[1] == hashlib.md5(grads[1][row[0]].float().numpy().tobytes()).hexdigest()
    assert not [d for d in os.listdir(tmp_path / "rank0") if d.startswith("step")]


def test_l1_header_param_list_and_step_filter(tmp_path):
    _train_capturing(tmp_path, "L1", steps=4, step=[1, "3-3"], param_list=["2.weight", "4.bias"])
    files = sorted(f for f in os.listdir(tmp_path / "rank0") if f.endswith(".csv"))
    assert files == ["grad_summary_1.csv", "grad_summary_3.csv"]
    header, rows = _read(tmp_path / "rank0" / "grad_summary_3.csv")
    assert header == ["param_name", "max", "min", "norm", "shape"]
    assert [r[0] for r in rows] == ["2.weight", "4.bias"]
    assert sorted(os.listdir(tmp_path / "rank0" / "step3")) == ["2.weight.npy", "4.bias.npy"]
    index = json.loads((tmp_path / "rank0" / "grad_probe_index.json").read_text())
    assert index["steps"] == [1, 3] and index["grad_level"] == "L1"


def test_rank_filter_excludes_this_process(tmp_path):
    _train_capturing(tmp_path, "L1", steps=1, rank=[1])
    assert not (tmp_path / "rank0").exists()


def test_unrelated_optimizer_does_not_count_as_a_step(tmp_path):
    model, other = mlp(), torch.nn.Linear(3, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    other_opt = torch.optim.SGD(other.parameters(), lr=0.05)
    probe = GradProbe(_config(tmp_path, "L1")).monitor(model)

    def before_step(step, net):
        other(torch.randn(2, 3)).sum().backward()
        other_opt.step()  # 1.2.1 counted this one too and shifted every step number

    train_mlp(model, optimizer, 3, before_step=before_step)
    probe.stop()
    assert sorted(f for f in os.listdir(tmp_path / "rank0") if f.endswith(".csv")) == \
        ["grad_summary_0.csv", "grad_summary_1.csv", "grad_summary_2.csv"]


def test_main_grad_is_preferred_and_stop_removes_the_hook(tmp_path):
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    probe = GradProbe(_config(tmp_path, "L1")).monitor(model, optimizer=optimizer)
    for p in model.parameters():
        p.main_grad = torch.full_like(p, 0.25)
    train_mlp(model, optimizer, 1)
    probe.stop()
    _, rows = _read(tmp_path / "rank0" / "grad_summary_0.csv")
    assert all(float(r[1]) == 0.25 and float(r[2]) == 0.25 for r in rows)
    assert not optimizer._optimizer_step_pre_hooks
    train_mlp(model, optimizer, 1)
    assert not (tmp_path / "rank0" / "grad_summary_1.csv").exists()


def test_training_is_bit_identical_with_grad_probe(tmp_path):
    def run(with_probe):
        model = mlp()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        probe = GradProbe(_config(tmp_path / "d", "L2")).monitor(model) if with_probe else None
        losses = train_mlp(model, optimizer, 4)
        if probe:
            probe.stop()
        return losses, [p.detach().clone() for p in model.parameters()]

    (la, pa), (lb, pb) = run(False), run(True)
    assert la == lb and all(torch.equal(a, b) for a, b in zip(pa, pb))


def test_compare_finds_the_flipped_parameter_at_its_step(tmp_path):
    _train_capturing(tmp_path / "a", "L2", steps=5)
    grads_b = _train_capturing(tmp_path / "b", "L2", steps=5, flip_from=3)
    outcome = GradComparator.compare_distributed(str(tmp_path / "a"), str(tmp_path / "b"), str(tmp_path / "out"))[0]
    header, rows = _read(tmp_path / "out" / "rank0" / "similarities.csv")
    assert header == ["step", "0", "1", "2", "3", "4"]  # 1.2.1's layout: the steps only
    table = {r[0]: r[1:] for r in rows}
    _, divergence = _read(tmp_path / "out" / "rank0" / "first_divergent_steps.csv")
    divergence = {r[0]: r[1:] for r in divergence}
    # the runs are identical up to step 3, so at step 3 only the flipped half of 0.weight disagrees
    g = grads_b[3]["0.weight"]
    flipped_nonzero = int((g[: g.shape[0] // 2] != 0).sum())
    assert float(table["0.weight"][3]) == pytest.approx(1 - flipped_nonzero / g.numel(), abs=0)
    assert [float(v) for v in table["0.weight"][:3]] == [1.0, 1.0, 1.0]
    assert divergence["0.weight"] == ["3", table["0.weight"][3]] and divergence["summary"][0] == "3"
    assert divergence["2.weight"] == ["", ""]
    total = sum(t.numel() for t in grads_b[3].values())
    assert float(table["summary"][3]) == pytest.approx(1 - flipped_nonzero / total)
    assert outcome.first_divergent["0.weight"] == 3
    pictures = os.listdir(tmp_path / "out" / "rank0" / "similarities_picture")
    assert "summary_similarities.png" in pictures and "0.weight_similarities.png" in pictures


def test_compare_of_l0_dumps_uses_md5(tmp_path):
    _train_capturing(tmp_path / "a", "L0", steps=4)
    _train_capturing(tmp_path / "b", "L0", steps=4, flip_from=2)
    outcome = GradComparator.compare(str(tmp_path / "a" / "rank0"), str(tmp_path / "b" / "rank0"), str(tmp_path / "o"))
    assert outcome.mode == "md5" and outcome.first_divergent["0.weight"] == 2
    assert outcome.values["0.weight"][:2] == [1.0, 1.0] and outcome.values["0.weight"][2] == 0.0
    assert (tmp_path / "o" / "md5_comparison.csv").exists()


def test_compare_of_l0_against_l1_is_a_clear_error(tmp_path):
    _train_capturing(tmp_path / "a", "L0", steps=1)
    _train_capturing(tmp_path / "b", "L1", steps=1)
    with pytest.raises(CompareError, match="same grad_level"):
        GradComparator.compare_distributed(str(tmp_path / "a"), str(tmp_path / "b"), str(tmp_path / "o"))


def test_grad_compare_command_line(tmp_path, capsys):
    from msprobe.cli import main

    _train_capturing(tmp_path / "a", "L1", steps=2)
    _train_capturing(tmp_path / "b", "L1", steps=2, flip_from=1)
    code = main(["-f", "pytorch", "grad_compare", "-i", str(tmp_path / "a"), "-b", str(tmp_path / "b"),
                 "-o", str(tmp_path / "o")])
    assert code == 0
    assert "first divergent step 1" in capsys.readouterr().out
    assert (tmp_path / "o" / "rank0" / "similarities.csv").exists()
    assert main(["-f", "pytorch", "grad_compare", "-i", str(tmp_path / "missing"), "-b", str(tmp_path / "b"),
                 "-o", str(tmp_path / "o")]) == 1


def test_precision_debugger_monitor_runs_grad_probe(tmp_path):
    """Needs the lead's wiring: PrecisionDebugger(task grad_probe).monitor(model)."""
    from msprobe.pytorch import PrecisionDebugger

    config = tmp_path / "config.json"
    config.write_text(json.dumps({"task": "grad_probe", "dump_path": str(tmp_path / "dump"),
                                  "grad_probe": {"grad_level": "L1"}}))
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    debugger = PrecisionDebugger(str(config))
    debugger.monitor(model)
    train_mlp(model, optimizer, 2)
    debugger.stop()
    assert (tmp_path / "dump" / "rank0" / "grad_summary_1.csv").exists()


@pytest.mark.parametrize("level", ["L0", "L1", "L2"])
def test_one_pass_kernel_and_framework_kernels_write_the_same_files(tmp_path, monkeypatch, level):
    """CPU float32 gradients go through the C pass; with it switched off the framework kernels give the
    same CSV values (norm to float32 rounding) and the same direction files."""
    import msprobe.core.monitor.grad_summary as grad_summary_module

    _train_capturing(tmp_path / "native", level, steps=2)
    monkeypatch.setattr(grad_summary_module, "bucket_stats", None)
    _train_capturing(tmp_path / "torch", level, steps=2)
    for step in range(2):
        header, native_rows = _read(tmp_path / "native" / "rank0" / f"grad_summary_{step}.csv")
        _, torch_rows = _read(tmp_path / "torch" / "rank0" / f"grad_summary_{step}.csv")
        norm = header.index("norm")
        for native_row, torch_row in zip(native_rows, torch_rows):
            assert native_row[:norm] + native_row[norm + 1:] == torch_row[:norm] + torch_row[norm + 1:]
            assert float(native_row[norm]) == pytest.approx(float(torch_row[norm]), rel=1e-6)
        if level != "L0":
            names = sorted(os.listdir(tmp_path / "native" / "rank0" / f"step{step}"))
            assert names == sorted(os.listdir(tmp_path / "torch" / "rank0" / f"step{step}")) and len(names) == 6
            for name in names:
                assert np.array_equal(np.load(tmp_path / "native" / "rank0" / f"step{step}" / name),
                                      np.load(tmp_path / "torch" / "rank0" / f"step{step}" / name))


def test_direction_folder_appears_whole_and_replaces_an_old_one(tmp_path):
    old = tmp_path / "rank0" / "step0"
    old.mkdir(parents=True)
    (old / "stale.npy").write_bytes(b"old")
    _train_capturing(tmp_path, "L1", steps=1)
    rank_dir = tmp_path / "rank0"
    assert sorted(os.listdir(rank_dir / "step0")) == sorted(f"{n}.npy" for n in
                                                            ["0.weight", "0.bias", "2.weight", "2.bias", "4.weight",
                                                             "4.bias"])
    assert not [n for n in os.listdir(rank_dir) if n.startswith(".tmp_")]
    assert oct(os.stat(rank_dir / "step0").st_mode & 0o777) == "0o750"
    assert oct(os.stat(rank_dir / "step0" / "0.weight.npy").st_mode & 0o777) == "0o640"


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16, torch.float16])
def test_gradient_stats_of_other_dtypes_match_the_framework_path(monkeypatch, dtype):
    """float64 goes through the C pass, 16-bit floats through framework kernels: both give float32 values,
    the same interval fractions and directions."""
    import msprobe.core.monitor.grad_summary as grad_summary_module
    import msprobe.pytorch.monitor.grad_probe as grad_probe_module
    from msprobe.core.monitor.grad_summary import GradProbeSettings

    settings = GradProbeSettings.from_config(_config("unused", "L2"))
    torch.manual_seed(3)
    grads = [("w", (torch.randn(40, 30) * 0.02).to(dtype)), ("b", torch.zeros(30, dtype=dtype))]
    fast = grad_probe_module.gradient_stats(grads, settings)
    monkeypatch.setattr(grad_summary_module, "bucket_stats", None)
    slow = grad_probe_module.gradient_stats(grads, settings)
    for f, s in zip(fast, slow):
        assert f.row("L2")[:-2] == s.row("L2")[:-2]  # intervals, =0, max, min
        assert float(f.row("L2")[-2]) == pytest.approx(float(s.row("L2")[-2]), rel=1e-6)  # norm
        assert np.array_equal(f.direction, s.direction)


def test_verdict_names_the_worst_parameter_of_the_divergent_step_first(tmp_path, caplog):
    import logging

    def flips(step, net):
        if step >= 2:  # every gradient a little off, the last parameter completely reversed
            for param in list(net.parameters())[:-1]:
                grad = param.grad.view(-1)
                grad[: max(1, grad.numel() // 5)] *= -1
            net[4].bias.grad.copy_(torch.where(net[4].bias.grad == 0, 1.0, -net[4].bias.grad))

    for label, before_step in (("a", None), ("b", flips)):
        model = mlp()
        probe = GradProbe(_config(tmp_path / label, "L2")).monitor(model)
        train_mlp(model, torch.optim.SGD(model.parameters(), lr=0.05), 4, before_step=before_step)
        probe.stop()
    caplog.set_level(logging.INFO, logger="msprobe")
    outcome = GradComparator.compare(str(tmp_path / "a" / "rank0"), str(tmp_path / "b" / "rank0"),
                                     str(tmp_path / "out"))
    assert {p: outcome.first_divergent[p] for p in outcome.params} == dict.fromkeys(outcome.params, 2), outcome.values
    assert outcome.params[-1] == "4.bias" and outcome.values["4.bias"][2] == 0.0
    line = next(r.getMessage() for r in caplog.records if "first divergent step" in r.getMessage())
    # file order would list 4.bias last, hidden in "and 1 more"
    assert "first divergent step 2 by direction similarity: 4.bias (0)," in line and "and 1 more" in line
    _, rows = _read(tmp_path / "out" / "first_divergent_steps.csv")
    similarities = [float(r[2]) for r in rows[:-1]]
    assert rows[0][:2] == ["4.bias", "2"] and similarities == sorted(similarities) and rows[-1][0] == "summary"
