"""Tensor statistics of the torch adapter: exact values, views, the per-memory cache, GC tracking."""
import gc
import math
import os

import pytest
import torch

from msprobe.core.dump.record import RecordBuilder
from msprobe.pytorch.dump.adapter import TorchAdapter

ADAPTER = TorchAdapter()


def _reference(tensor):
    data = tensor.detach()
    data = data if data.dtype == torch.float64 else data.float()
    return (data.max().item(), data.min().item(), data.mean().item(), torch.linalg.vector_norm(data.double()).item())


@pytest.mark.parametrize("make", [
    lambda: torch.randn(64, 48),
    lambda: torch.randn(64, 48).t(),                        # transposed view
    lambda: torch.randn(4, 8, 16, 2).permute(2, 0, 3, 1),  # permuted view
    lambda: torch.randn(64, 48)[:, 5:30],                   # strided, not dense
    lambda: torch.randn(64, 48, dtype=torch.float64),
    lambda: torch.randn(64, 48).to(torch.bfloat16),
    lambda: torch.randn(64, 48).to(torch.float16).t(),
    lambda: torch.randint(-5, 9, (7, 3)),
])
def test_statistics_match_a_float64_reference(make):
    tensor = make()
    high, low, mean, norm = ADAPTER.tensor_stats(tensor)
    ref_high, ref_low, ref_mean, ref_norm = _reference(tensor)
    assert (high, low) == (ref_high, ref_low)
    assert mean == pytest.approx(ref_mean, rel=1e-5, abs=1e-6)
    assert norm == pytest.approx(ref_norm, rel=1e-6)


def test_special_tensors():
    assert ADAPTER.tensor_stats(torch.tensor([True, False])) == (True, False, None, None)
    assert ADAPTER.tensor_stats(torch.tensor(2.5)) == (2.5, 2.5, 2.5, 2.5)
    assert ADAPTER.tensor_stats(torch.empty(0, 3)) is None
    high, low, mean, norm = ADAPTER.tensor_stats(torch.tensor([1.0, float("nan")]))
    assert math.isnan(high) and math.isnan(mean) and math.isnan(norm)
    assert ADAPTER.tensor_stats(torch.tensor([3e38, 3e38]))[3] == math.inf  # float32 overflow, as torch


def test_views_of_one_memory_share_statistics_until_it_changes():
    records = RecordBuilder(ADAPTER)
    # the Python describe_tensor, whose reads go through the adapter's tensor_stats (counted here); the C descriptor
    # gives the same descriptors and cache entries (test_pt_per_call_path.py)
    vars(records).pop("describe_tensor", None)
    base = torch.randn(32, 16)
    first = records.describe(base)
    calls = []
    original = ADAPTER.tensor_stats
    ADAPTER.tensor_stats = lambda tensor: calls.append(tensor.shape) or original(tensor)
    try:
        for view in (base.t(), base.view(16, 32), base.reshape(-1)):
            desc = records.describe(view)
            assert (desc["Max"], desc["Mean"], desc["Norm"]) == (first["Max"], first["Mean"], first["Norm"])
        assert calls == []                      # served from the cache
        base.mul_(2)                            # new version: computed again
        assert records.describe(base.t())["Max"] == pytest.approx(2 * first["Max"])
        assert records.describe(base[:, :8])["Max"] <= 2 * first["Max"]  # a different region
        assert len(calls) == 2
    finally:
        ADAPTER.tensor_stats = original


def test_freed_memory_is_never_served_from_the_cache():
    records = RecordBuilder(ADAPTER)
    for value in range(20):  # the allocator hands the same block back, with version 0 each time
        desc = records.describe(torch.full((256,), float(value)).view(16, 16))
        assert desc["Max"] == float(value)


def test_tensor_descriptors_are_not_tracked_by_the_garbage_collector():
    records = RecordBuilder(ADAPTER)
    tensor = torch.randn(8, 8)
    records.describe(tensor)
    gc.collect()  # the shared shape tuple is untracked from now on
    described = records.describe_args((tensor, [tensor.t(), 3]), "x")
    assert not gc.is_tracked(described[0]) and not any(gc.is_tracked(d) for d in described[1])




@pytest.mark.parametrize("count", [3, 1000, 65537, (1 << 24) + 3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_host_mean_is_as_accurate_as_torch_mean(count, dtype):
    # the kernel sums in float32 blocks then in double; torch.mean's float32 sum changes with the
    # thread count. Its error stays within a few roundings of the mean magnitude (no error growth with
    # the length), and within torch.mean's own error where that is larger
    torch.manual_seed(count)
    tensor = torch.randn(count, dtype=dtype) * 7 + 0.5
    high, low, mean, norm = ADAPTER.tensor_stats(tensor)
    assert (high, low) == (tensor.max().item(), tensor.min().item())
    values = tensor.double().tolist()
    exact = math.fsum(values) / count
    scale = math.fsum(abs(v) for v in values) / count
    assert abs(mean - exact) <= max(abs(tensor.mean().item() - exact), 4 * torch.finfo(dtype).eps * scale)
    assert norm == pytest.approx(torch.linalg.vector_norm(tensor.double()).item(), rel=1e-6)


def test_same_content_compares_bits():
    snapshot = torch.tensor([0.0, float("nan"), 1.5])
    assert ADAPTER.same_content(snapshot, torch.tensor([0.0, float("nan"), 1.5]))
    assert not ADAPTER.same_content(snapshot, torch.tensor([-0.0, float("nan"), 1.5]))
    assert ADAPTER.same_content(torch.arange(6.0).reshape(2, 3).t().contiguous(), torch.arange(6.0).reshape(2, 3).t())
    assert ADAPTER.same_content(torch.tensor([1 + 2j]), torch.tensor([1 + 2j]))
    assert ADAPTER.same_content(torch.tensor([1.5], dtype=torch.bfloat16), torch.tensor([1.5], dtype=torch.bfloat16))


@pytest.mark.parametrize("direct", [True, False])
def test_tensor_files_are_byte_identical_to_torch_save(tmp_path, monkeypatch, direct):
    """Every kind of tensor, three times over (the first file of a kind comes from torch.save, the second
    is checked against it, the third uses the header template), with and without O_DIRECT."""
    import msprobe.core.dump.direct_io as direct_io

    monkeypatch.setattr(direct_io, "_enabled", direct)
    kinds = [lambda: torch.randn(3, 5), lambda: torch.arange(10, dtype=torch.int64), lambda: torch.randn(4).bfloat16(),
             lambda: torch.randn(6, 4).t(), lambda: torch.tensor(2.5), lambda: torch.zeros(0, 3),
             lambda: torch.randn(300_001), lambda: torch.tensor([True, False]), lambda: torch.randn(8, 8)[:, ::2],
             lambda: torch.randn(2, 3, dtype=torch.complex64)]
    for round_ in range(3):
        for index, make in enumerate(kinds):
            tensor = make()
            ours, theirs = tmp_path / f"ours{index}_{round_}.pt", tmp_path / f"theirs{index}_{round_}.pt"
            snapshot = ADAPTER.copy_for_save(tensor)  # the storage key inside the file is the storage's address
            ADAPTER.save_tensor(snapshot, str(ours))
            torch.save(snapshot, str(theirs), _use_new_zipfile_serialization=False)
            assert ours.read_bytes() == theirs.read_bytes(), (index, round_)
            assert torch.equal(torch.load(ours), tensor)


def test_direct_files_fall_back_to_the_page_cache_and_spill_past_their_capacity(tmp_path, monkeypatch):
    import msprobe.core.dump.direct_io as direct_io

    payload = bytes(range(256)) * 40 + b"tail"  # not a whole number of blocks
    real_open = os.open

    def refuse_direct(path, flags, *args):
        if flags & direct_io._O_DIRECT:
            raise OSError(22, "Invalid argument")  # what tmpfs answers
        return real_open(path, flags, *args)

    monkeypatch.setattr(direct_io.os, "open", refuse_direct)
    monkeypatch.setattr(direct_io, "_refused", set())
    for name in ("a.bin", "b.bin"):  # the second file skips the O_DIRECT attempt on this file system
        with direct_io.DirectFile(str(tmp_path / name), len(payload)) as handle:
            handle.write(payload[:100])
            handle.write(payload[100:])
        assert (tmp_path / name).read_bytes() == payload
        assert oct((tmp_path / name).stat().st_mode & 0o777) == "0o640"
    assert direct_io._refused
    with direct_io.DirectFile(str(tmp_path / "c.bin"), 10) as handle:  # capacity (+ one block) exceeded
        handle.write(payload * 3)
    assert (tmp_path / "c.bin").read_bytes() == payload * 3


def test_deferred_handles_resolve_like_host_statistics():
    # on an accelerator tensor_stats returns the four values stacked on the device; resolve_stats turns a
    # whole step of them into numbers at once. The same code path, fed here with CPU tensors.
    from msprobe.pytorch.dump.adapter import tensor_statistics

    tensors = [torch.randn(5, 7), torch.tensor([True, False]), torch.randn(3, dtype=torch.float64),
               torch.randn(4).to(torch.bfloat16)]
    handles = [torch.stack(tensor_statistics(t)) for t in tensors]
    for tensor, resolved in zip(tensors, ADAPTER.resolve_stats(handles)):
        host = ADAPTER.tensor_stats(tensor)
        assert resolved[:2] == host[:2]
        for got, expected in zip(resolved[2:], host[2:]):
            assert got == pytest.approx(expected, rel=1e-6) if expected is not None else got is None


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("count", [5, 4099, 1 << 20 | 3])
def test_kernel_and_fallback_paths_agree(monkeypatch, dtype, count):
    """The C kernel and the torch fallback (no compiler at install) give the same Max/Min, and Mean/Norm
    within float32 rounding; the fallback sums in float64 (its float32 Mean is the exact mean correctly rounded,
    whether the kernel is built does not move a verdict), the kernel's Norm is far closer to the exact one than a
    float32 dot product."""
    import msprobe.pytorch.dump.adapter as adapter_module

    tensor = (torch.randn(count, generator=torch.Generator().manual_seed(count)) * 3 + 1).to(dtype)
    fast = ADAPTER.tensor_stats(tensor)
    monkeypatch.setattr(adapter_module, "float_stats", None)
    slow = ADAPTER.tensor_stats(tensor)
    assert fast[:2] == slow[:2] == (tensor.max().item(), tensor.min().item())
    values = tensor.double().tolist()
    exact_mean = math.fsum(values) / count
    if dtype == torch.float32:
        import numpy as np

        assert slow[2] == float(np.float32(exact_mean))
    else:
        assert slow[2] == pytest.approx(exact_mean, rel=1e-14)
    assert fast[2] == pytest.approx(slow[2], rel=1e-6) and fast[3] == pytest.approx(slow[3], rel=1e-6)
    exact = math.sqrt(math.fsum(v * v for v in values))
    assert fast[3] == pytest.approx(exact, rel=1e-7 if dtype == torch.float32 else 1e-13)


def test_negative_views_sparse_and_subclasses_give_the_values_they_stand_for():
    base = torch.tensor([[1.0, -2.0], [3.0, 0.5]])
    negated = torch._neg_view(base)  # stores the un-negated values, reads as -base
    assert negated.is_neg()
    assert ADAPTER.tensor_stats(negated)[:3] == ADAPTER.tensor_stats(-base)[:3] == (2.0, -3.0, -0.625)
    sparse = base.to_sparse()  # through torch's kernels on the dense values
    assert ADAPTER.tensor_stats(sparse)[:3] == ADAPTER.tensor_stats(base)[:3]
    assert ADAPTER.tensor_stats(sparse)[3] == pytest.approx(ADAPTER.tensor_stats(base)[3], rel=1e-6)

    class Tagged(torch.Tensor):
        pass

    tagged = base.as_subclass(Tagged)  # through torch's kernels (a subclass may hold no memory of its own)
    assert ADAPTER.tensor_stats(tagged)[:3] == ADAPTER.tensor_stats(base)[:3]
    assert ADAPTER.tensor_stats(tagged)[3] == pytest.approx(ADAPTER.tensor_stats(base)[3], rel=1e-6)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_16_bit_tensors_kernel_and_torch_paths_agree(monkeypatch, dtype):
    """bfloat16/float16 host tensors go through the C kernel (widened to float32 exactly); without it,
    through torch's float32 reductions. Same Max/Min, Mean/Norm to float32 rounding."""
    import msprobe.pytorch.dump.adapter as adapter_module

    tensor = (torch.randn(70_001, generator=torch.Generator().manual_seed(3)) * 4 + 1).to(dtype)
    fast = ADAPTER.tensor_stats(tensor)
    monkeypatch.setattr(adapter_module, "float_stats", None)
    slow = ADAPTER.tensor_stats(tensor)
    assert fast[:2] == slow[:2] == (tensor.float().max().item(), tensor.float().min().item())
    assert fast[2] == pytest.approx(slow[2], rel=1e-5) and fast[3] == pytest.approx(slow[3], rel=1e-5)
    exact_norm = torch.linalg.vector_norm(tensor.double()).item()
    assert abs(fast[3] - exact_norm) <= abs(slow[3] - exact_norm) + 1e-7 * exact_norm  # the kernel is closer


@pytest.mark.parametrize("poison", ["none", "nan statistic", "inf argument", "nan in a list argument"])
def test_dump_json_writes_nan_and_infinity_as_the_reference_does_whatever_the_step_holds(tmp_path, poison):
    # a clean step's nulls are taken as Nones without walking the entries (RecordBuilder.finite); one NaN statistic
    # or one infinite float argument anywhere in the step makes every entry be checked, so NaN/Infinity are written
    # as the json module writes them, never as null
    import json

    from msprobe.pytorch import PrecisionDebugger
    from tests.pytorch.dump.pt_dump_helpers import write_config

    x = torch.randn(4, 3)
    debugger = PrecisionDebugger(config_path=write_config(tmp_path, "statistics", "L1"))
    debugger.start()
    torch.sum(x, dim=None)  # a None argument: a null in a clean entry
    if poison == "nan statistic":
        torch.mul(torch.tensor([1.0, math.nan]), 2.0)
    elif poison == "inf argument":
        torch.clamp(x, max=math.inf)
    elif poison == "nan in a list argument":
        torch.nn.functional.pad(x, [1, 1], value=math.nan)
    finite = debugger.collector.records.finite
    debugger.stop()
    debugger.close()
    assert finite is (poison == "none")
    text = (tmp_path / "dump" / "step0" / "rank" / "dump.json").read_text()
    loaded = json.loads(text)  # the json module reads NaN and Infinity back
    assert text.count("null") == json.dumps(loaded).count("null")  # every null is a None
    assert ("NaN" in text) is (poison in ("nan statistic", "nan in a list argument"))
    assert ("Infinity" in text) is (poison == "inf argument")
    assert json.dumps(loaded, indent=1).replace(" ", "").replace("\n", "") == text.replace(" ", "").replace("\n", "")


def test_l2_outputs_of_in_place_ops_hold_the_written_values(tmp_path):
    # inside a dispatch mode a written tensor's version counter moves only after the mode returns: the output of
    # copy_ / add_ / an out= op must be described as written, not as the op's input was (same memory, same version)
    import json

    from msprobe.pytorch import PrecisionDebugger
    from tests.pytorch.dump.pt_dump_helpers import write_config

    x, y, z = torch.zeros(3), torch.arange(3.0) + 1, torch.zeros(2, 3)
    debugger = PrecisionDebugger(config_path=write_config(tmp_path, "statistics", "L2"))
    debugger.start()
    x.copy_(y)
    x.add_(1)
    torch.add(y, y, out=z[0])
    debugger.stop()
    debugger.close()
    data = json.loads((tmp_path / "dump" / "step0" / "rank" / "dump.json").read_text())["data"]
    copied, added, out = data["Aten.copy_.0.forward"], data["Aten.add_.0.forward"], data["Aten.add.0.forward"]
    assert copied["input_args"][0]["Max"] == 0.0 and copied["output"][0]["Max"] == y.max().item() == 3.0
    assert copied["output"][0]["Mean"] == pytest.approx(2.0) and added["input_args"][0]["Max"] == 3.0
    assert added["output"][0]["Max"] == x.max().item() == 4.0
    assert out["input_kwargs"]["out"]["Max"] == 0.0 and out["output"][0]["Max"] == z[0].max().item() == 6.0
