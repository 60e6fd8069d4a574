"""PtdbgDispatch on real small models on CPU: bit-identical training, forward and backward checked in one
context, a fragile op reported while healthy ops pass (fp32, bf16, fp16), dump modes and CSV layout."""
import csv
import glob
import os

import numpy as np
import pytest
import torch

from dispatch_models import FragileMLP, HealthyMLP, NaiveSoftmaxHead, TinyBlock
from msprobe.core.errors import ConfigError
from msprobe.pytorch.online_dispatch import PtdbgDispatch
from msprobe.pytorch.online_dispatch.report import DETAIL_COLUMNS, SUMMARY_COLUMNS

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
# an fp32 op re-run on CPU in fp32 is the same kernel: fp32 models are checked against float64
BENCH_FOR = {"float32": "float64", "bfloat16": "float32", "float16": "float32"}


def _step(model, x, seed=0):
    """One training step's forward and backward; returns the output and every gradient."""
    torch.manual_seed(seed)
    model.zero_grad(set_to_none=True)
    out = model(x)
    out.float().square().mean().backward()
    return out.detach().clone(), [p.grad.clone() for p in model.parameters()]


def _model(cls, dtype):
    torch.manual_seed(1)
    return cls().to(dtype).train()


def _verdicts(dispatch):
    return {row["Op Name"]: row["Accuracy Reached or Not"] for row in dispatch.results[0]}


def _read_csv(path):
    with open(path, newline="") as handle:
        return list(csv.reader(handle))


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_training_step_is_bit_identical_under_dispatch(tmp_path, dtype):
    model = _model(TinyBlock, DTYPES[dtype])
    x = torch.randn(2, 5, 16).to(DTYPES[dtype])
    plain_out, plain_grads = _step(model, x)
    plain_rng = torch.random.get_rng_state()
    with PtdbgDispatch(dump_mode="auto", dump_path=str(tmp_path), bench_dtype=BENCH_FOR[dtype]) as dispatch:
        checked_out, checked_grads = _step(model, x)
    assert torch.equal(plain_out, checked_out)  # dropout draws the same numbers: random ops are not re-run
    assert all(torch.equal(a, b) for a, b in zip(plain_grads, checked_grads))
    assert torch.equal(plain_rng, torch.random.get_rng_state())
    assert len(dispatch.results[0]) > 20


def test_forward_and_backward_are_checked_in_one_context(tmp_path):
    model = _model(HealthyMLP, torch.float32)
    with PtdbgDispatch(dump_path=str(tmp_path), bench_dtype="float64") as dispatch:
        _step(model, torch.randn(4, 8))
    directions = {(row["Op Name"].rsplit("_", 1)[0], row["Direction"]) for row in dispatch.results[0]}
    assert {("addmm", "forward"), ("_softmax", "forward"), ("gelu", "forward")} <= directions
    assert {("mm", "backward"), ("_softmax_backward_data", "backward"), ("gelu_backward", "backward")} <= directions
    assert set(_verdicts(dispatch).values()) == {"Yes"}


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_fragile_op_is_reported_while_healthy_ops_pass(tmp_path, dtype):
    model = _model(FragileMLP, DTYPES[dtype])
    x = torch.randn(4, 8).to(DTYPES[dtype])
    with PtdbgDispatch(dump_mode="auto", dump_path=str(tmp_path), bench_dtype=BENCH_FOR[dtype]) as dispatch:
        _step(model, x)
    verdicts = _verdicts(dispatch)
    assert verdicts.pop("shift_cancel_0") == "No"
    assert len(verdicts) >= 8 and set(verdicts.values()) == {"Yes"}, verdicts
    detail = [row for row in dispatch.results[1] if row["Op Name"] == "shift_cancel_0"][0]
    assert detail["Device Dtype"] == dtype and detail["Bench Dtype"] == BENCH_FOR[dtype]
    # the reported error is the real one: recompute it from the dumped input
    dumped_in = np.load(glob.glob(os.path.join(dispatch.run_dir, "npu", "shift_cancel_0_input.0.npy"))[0])
    dumped_out = np.load(os.path.join(dispatch.run_dir, "npu", "shift_cancel_0_output.0.npy"))
    bench = dumped_in.astype(np.float64)
    small = np.abs(bench) < 1
    error = np.abs(dumped_out.astype(np.float64) - bench)
    assert detail["Small Value Max Abs Err"] == pytest.approx(error[small].max())
    # auto: only the failing op's tensors are written
    assert {os.path.basename(p).split("_input")[0].split("_output")[0]
            for p in glob.glob(os.path.join(dispatch.run_dir, "*", "*.npy"))} == {"shift_cancel_0"}


def test_float32_model_against_float32_bench_is_the_same_kernel(tmp_path):
    model = _model(FragileMLP, torch.float32)
    with PtdbgDispatch(dump_path=str(tmp_path)) as dispatch:  # bench_dtype float32, as 1.2.1
        _step(model, torch.randn(4, 8))
    assert set(_verdicts(dispatch).values()) == {"Yes"}


def test_fp16_overflow_in_a_naive_softmax_is_found(tmp_path):
    model = _model(NaiveSoftmaxHead, torch.float16)
    x = (torch.randn(4, 8) * 4).half()
    with PtdbgDispatch(dump_mode="OFF", dump_path=str(tmp_path)) as dispatch:
        with torch.no_grad():
            model(x)
    verdicts = _verdicts(dispatch)
    assert verdicts["exp_0"] == "No"
    assert verdicts["addmm_0"] == "Yes" and verdicts["mul_0"] == "Yes"
    assert "NaN/Inf" in [r for r in dispatch.results[0] if r["Op Name"] == "exp_0"][0]["Message"]
    assert not glob.glob(os.path.join(dispatch.run_dir, "*", "*.npy"))  # OFF: no tensors


def test_csv_files_have_headers_and_one_row_per_op(tmp_path):
    model = _model(HealthyMLP, torch.bfloat16)
    with PtdbgDispatch(dump_mode="OFF", dump_path=str(tmp_path), tag="exp1") as dispatch:
        with torch.no_grad():
            model(torch.randn(4, 8).bfloat16())
    assert os.path.basename(dispatch.run_dir).startswith("atat_exp1_rank0_")
    stamp = os.path.basename(dispatch.run_dir).split("_")[-1]
    summary = _read_csv(os.path.join(dispatch.run_dir, f"compare_result_rank0_{stamp}.csv"))
    details = _read_csv(dispatch.details_path)
    assert summary[0] == SUMMARY_COLUMNS and details[0] == DETAIL_COLUMNS
    assert [row[0] for row in summary[1:]] == ["addmm_0", "gelu_0", "_softmax_0", "addmm_1"]
    assert all(row[4] == "Yes" for row in summary[1:])
    assert all(row[3] == "bfloat16" and row[4] == "float32" for row in details[1:])
    assert float(details[1][DETAIL_COLUMNS.index("Error Threshold")]) == 2.0 ** -8


def test_all_and_list_dump_modes(tmp_path):
    model = _model(HealthyMLP, torch.float32)
    x = torch.randn(4, 8)
    with PtdbgDispatch(dump_mode="all", dump_path=str(tmp_path / "all")) as everything:
        with torch.no_grad():
            out = model(x)
    names = sorted(os.path.basename(p) for p in glob.glob(os.path.join(everything.run_dir, "npu", "*.npy")))
    assert "addmm_1_output.0.npy" in names and "gelu_0_input.0.npy" in names
    np.testing.assert_array_equal(np.load(os.path.join(everything.run_dir, "npu", "addmm_1_output.0.npy")), out.numpy())
    np.testing.assert_array_equal(np.load(os.path.join(everything.run_dir, "npu", "addmm_0_input.1.npy")), x.numpy())
    cpu = np.load(os.path.join(everything.run_dir, "cpu", "addmm_1_output.0.npy"))
    assert cpu.dtype == np.float32  # the bench output as computed
    with PtdbgDispatch(dump_mode="list", api_list=["gelu"], dump_path=str(tmp_path / "list")) as listed:
        with torch.no_grad():
            model(x)
    assert sorted(os.path.basename(p) for p in glob.glob(os.path.join(listed.run_dir, "*", "*.npy"))) == [
        "gelu_0_input.0.npy", "gelu_0_output.0.npy", "gelu_0_output.0.npy"]


def test_views_copies_factories_and_random_ops_are_not_rerun(tmp_path):
    x, half = torch.randn(3, 4), torch.full((3, 4), 0.5)
    with PtdbgDispatch(dump_path=str(tmp_path), debug=True) as dispatch:
        y = x.t().contiguous().view(12).clone()
        torch.zeros(3)
        torch.rand(3)
        torch.bernoulli(half)
        torch.ops.aten.native_dropout(x, 0.5, True)
        z = (y * 2).sum()
    names = [row["Op Name"] for row in dispatch.results[0]]
    assert names == ["mul_0", "sum_0"], names
    assert z.item() == pytest.approx(float((x.t().reshape(12) * 2).sum()))


def test_in_place_ops_are_checked_on_their_inputs_before_the_update(tmp_path):
    x = torch.randn(5).half()
    expected = x.float() * 3
    with PtdbgDispatch(dump_mode="all", dump_path=str(tmp_path)) as dispatch:
        x.mul_(3)
    assert _verdicts(dispatch) == {"mul__0": "Yes"}
    np.testing.assert_array_equal(np.load(os.path.join(dispatch.run_dir, "cpu", "mul__0_output.0.npy")),
                                  expected.numpy())


@pytest.mark.parametrize("kwargs, message", [
    ({"dump_mode": "some"}, "dump_mode must be one of"),
    ({"dump_mode": "list"}, "needs api_list"),
    ({"process_num": -1}, "process_num"),
    ({"bench_dtype": "float16"}, "bench_dtype"),
    ({"dump_path": None}, "dump_path is required"),
])
def test_invalid_arguments_raise_a_clear_error(tmp_path, kwargs, message):
    with pytest.raises(ConfigError, match=message):
        PtdbgDispatch(**{"dump_path": str(tmp_path), **kwargs})
