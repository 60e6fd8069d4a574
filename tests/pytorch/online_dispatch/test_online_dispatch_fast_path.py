"""The fast judge (one C pass over both buffers) gives judge_output's numbers, and the widened-input cache
reuses copies only while a tensor is unchanged."""

import numpy as np
import pytest
import torch

from dispatch_models import TinyBlock
from msprobe.pytorch.online_dispatch import PtdbgDispatch, single_benchmark
from msprobe.pytorch.online_dispatch.checker import _judge
from msprobe.pytorch.online_dispatch.single_benchmark import judge_output
from msprobe.pytorch.online_dispatch.widen_cache import WidenCache

METRICS = ("cosine", "max_abs_all", "max_abs_err", "max_abs_idx", "max_rel_err", "max_rel_idx", "error_balance",
           "status", "message")


def _numpy_row(dut: torch.Tensor, bench: torch.Tensor):
    dut_np = dut.float().numpy() if dut.dtype == torch.bfloat16 else dut.numpy()
    return judge_output(dut_np, bench.numpy(), str(dut.dtype).rsplit(".", 1)[-1])


def _assert_rows_agree(fast, slow):
    for key in METRICS:
        if isinstance(slow[key], float):
            assert fast[key] == pytest.approx(slow[key], rel=1e-9, abs=1e-300), key
        else:
            assert fast[key] == slow[key], key


def test_the_kernel_is_built_and_used_as_the_switch_says():
    from msprobe._native import _pair, enabled

    assert _pair.judge_pair is not None, "msprobe/_native/_pair.c was not compiled"
    assert (single_benchmark._judge_pair is _pair.judge_pair) is enabled()


@pytest.mark.parametrize("dut_dtype,bench_dtype", [(torch.float32, torch.float64), (torch.float32, torch.float32),
                                                   (torch.bfloat16, torch.float32), (torch.float16, torch.float32),
                                                   (torch.float16, torch.float64), (torch.float64, torch.float64),
                                                   (torch.bfloat16, torch.float64)])
@pytest.mark.parametrize("count", [1, 7, 8, 9, 4099])
def test_fast_judge_equals_numpy_judge(dut_dtype, bench_dtype, count):
    generator = torch.Generator().manual_seed(count)
    bench = (torch.randn(count, generator=generator, dtype=torch.float64) * 3).to(bench_dtype)
    noise = torch.randn(count, generator=generator, dtype=torch.float64) * 1e-4
    dut = (bench.double() + noise).to(dut_dtype)
    fast = _judge(dut, bench)
    _assert_rows_agree(fast, _numpy_row(dut, bench))


def test_fast_judge_finds_the_first_maximum_and_a_failure():
    bench = torch.linspace(-3, 3, 1001, dtype=torch.float64)
    bench[10] = bench[900] = 2.0
    dut = bench.float().clone()
    dut[10] += 0.5      # |bench| >= 1: a relative error of 0.25
    dut[900] += 0.5     # the same relative error, later: the first one is reported
    dut[500] += 0.25    # |bench| < 1: an absolute error
    fast = _judge(dut, bench)
    slow = _numpy_row(dut, bench)
    _assert_rows_agree(fast, slow)
    assert fast["status"] == "fail" and fast["max_rel_idx"] == 10 and fast["max_abs_idx"] == 500


def test_nan_and_inf_fall_back_to_the_position_check():
    bench = torch.tensor([1.0, float("nan"), 3.0, float("inf")], dtype=torch.float64)
    same = _judge(bench.float(), bench)
    assert same["status"] == "pass" and same["max_abs_idx"] == ""
    moved = _judge(torch.tensor([float("nan"), 2.0, 3.0, float("inf")]), bench)
    assert moved["status"] == "fail" and "NaN/Inf" in moved["message"]


def test_non_contiguous_outputs_are_judged_in_logical_order():
    bench = torch.randn(64, 32, dtype=torch.float64)
    dut = bench.float().t()  # a transposed view: logical order differs from memory order
    dut_bench = bench.t()
    dut = dut.clone()
    dut[3, 5] += 1.0
    fast = _judge(dut, dut_bench)
    _assert_rows_agree(fast, _numpy_row(dut.contiguous(), dut_bench.contiguous()))
    assert fast["max_rel_idx"] == 3 * 64 + 5 or fast["max_abs_idx"] == 3 * 64 + 5


def test_portable_loops_agree_with_the_simd_ones(portable_and_simd_rows):
    """MSPROBE_NATIVE_SIMD=0 runs the portable C loops (non-x86 hosts); same metrics to within rounding."""
    script = (
        "import json, torch\n"
        "from msprobe._native import _pair as k\n"
        "rows = []\n"
        "for count in (1, 5, 8, 13, 70001):\n"
        "    g = torch.Generator().manual_seed(count)\n"
        "    b = torch.randn(count, generator=g, dtype=torch.float64) * 2\n"
        "    for d, kind in ((b.float(), 4), (b.to(torch.bfloat16), k.BFLOAT16), (b.half(), k.FLOAT16)):\n"
        "        rows.append(k.judge_pair(d.data_ptr(), kind, b.data_ptr(), 8, count))\n"
        "print(json.dumps({'simd': k.simd(), 'rows': rows}))\n")
    for portable, simd in portable_and_simd_rows(script):
        assert portable[2] == simd[2] and portable[4] == simd[4]  # positions of the maxima
        assert portable == pytest.approx(simd, rel=1e-9, abs=1e-300)


def test_model_results_with_and_without_the_kernel_are_the_same(tmp_path, monkeypatch):
    torch.manual_seed(0)
    model = TinyBlock().to(torch.bfloat16)
    x = torch.randn(4, 16, 16).to(torch.bfloat16)

    def run(name):
        torch.manual_seed(1)  # the same dropout masks
        with PtdbgDispatch(dump_path=str(tmp_path / name)) as dispatch:
            model(x).float().square().mean().backward()
        model.zero_grad(set_to_none=True)
        return dispatch.results[1]

    fast = run("fast")
    monkeypatch.setattr(single_benchmark, "_judge_pair", None)
    slow = run("slow")
    assert len(fast) == len(slow) > 20
    for fast_row, slow_row in zip(fast, slow):
        assert fast_row["Op Name"] == slow_row["Op Name"]
        for column in ("Cosine", "MaxAbsErr", "Small Value Max Abs Err", "Max Rel Err", "Error Balance"):
            if isinstance(slow_row[column], float):
                assert fast_row[column] == pytest.approx(slow_row[column], rel=1e-9, abs=1e-300)
        assert (fast_row["Status"], fast_row["Max Abs Idx"], fast_row["Max Rel Idx"]) == \
               (slow_row["Status"], slow_row["Max Abs Idx"], slow_row["Max Rel Idx"])


# ---- widened-input cache -------------------------------------------------------------------------------
def test_views_of_one_storage_share_one_widened_copy():
    cache = WidenCache()
    weight = torch.randn(8, 6)
    first = cache.widen(weight, torch.float64)
    transposed = cache.widen(weight.t(), torch.float64)
    assert (cache.hits, cache.misses) == (1, 1)
    assert torch.equal(first, weight.double()) and torch.equal(transposed, weight.t().double())
    assert transposed.dtype == torch.float64 and transposed.device.type == "cpu"


def test_a_written_storage_is_widened_again():
    cache = WidenCache()
    tensor = torch.randn(16)
    cache.widen(tensor, torch.float64)
    tensor.data.add_(1.0)  # `.data` has its own version counter: only `written` can tell
    cache.written(tensor)
    assert torch.equal(cache.widen(tensor, torch.float64), tensor.double())
    assert cache.misses == 2 and cache.cached_bytes == 16 * 8


def test_small_views_and_same_dtype_are_not_cached():
    cache = WidenCache()
    big = torch.randn(100)
    assert torch.equal(cache.widen(big[:10], torch.float64), big[:10].double())
    same = torch.randn(4, dtype=torch.float64)
    assert cache.widen(same, torch.float64) is same
    assert cache.cached_bytes == 0 and cache.hits == cache.misses == 0


def test_the_cache_is_bounded_in_bytes():
    cache = WidenCache(max_bytes=3 * 100 * 8)
    tensors = [torch.randn(100) for _ in range(5)]
    for tensor in tensors:
        cache.widen(tensor, torch.float64)
    assert cache.cached_bytes == 3 * 100 * 8
    cache.widen(tensors[0], torch.float64)  # the oldest left first
    assert cache.misses == 6


def test_in_place_updates_inside_the_context_are_seen(tmp_path):
    """An op reads a tensor, an in-place op changes it (through .data, as old optimizers do), and the next
    read must be re-run on the new values: a stale copy would turn a healthy op into a failure."""
    weight = torch.randn(32, 32)
    x = torch.randn(8, 32)
    with PtdbgDispatch(dump_path=str(tmp_path), bench_dtype="float64") as dispatch:
        torch.mm(x, weight)
        weight.data.mul_(3.0).add_(1.0)
        torch.mm(x, weight)
        weight.add_(torch.ones_like(weight))  # and through the tensor itself
        torch.mm(x, weight)
    verdicts = [(row["Op Name"], row["Accuracy Reached or Not"]) for row in dispatch.results[0]]
    assert [v for name, v in verdicts if name.startswith("mm_")] == ["Yes", "Yes", "Yes"]
    # x is widened once and reused twice; the weight is widened again after each write
    assert (dispatch._widened.hits, dispatch._widened.misses) == (2, 4)


def test_training_step_results_unchanged_and_cache_used(tmp_path):
    torch.manual_seed(0)
    model = TinyBlock()
    x = torch.randn(4, 16, 16)
    torch.manual_seed(1)  # the same dropout masks in both steps
    model(x).square().mean().backward()
    reference = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    torch.manual_seed(1)
    with PtdbgDispatch(dump_path=str(tmp_path), bench_dtype="float64") as dispatch:
        model(x).square().mean().backward()
    assert all(torch.equal(p.grad, r) for p, r in zip(model.parameters(), reference))
    assert dispatch._widened.hits > 5
    assert all(row["Accuracy Reached or Not"] == "Yes" for row in dispatch.results[0]
               if row["Accuracy Reached or Not"] != "Skipped")
    assert np.isfinite([r["Max Rel Err"] for r in dispatch.results[1] if r["Max Rel Err"] != ""]).all()
