"""The MindSpore monitor's host statistics (CPU: one C pass on a host copy) equal the device reductions
they replace, NaN, zeros, float16 and integer tensors included."""
import math

import numpy as np
import pytest

OPS = ["min", "max", "norm", "mean", "zeros", "nans"]


def _tensors(ms):
    from mindspore import Tensor

    rng = np.random.default_rng(0)
    values = rng.standard_normal((33, 17)).astype(np.float32)
    values[::5, ::3] = 0.0
    with_nan = values.copy()
    with_nan[3, 4] = np.nan
    return {"float32": Tensor(values), "float16": Tensor(values.astype(np.float16)),
            "float64": Tensor(values.astype(np.float64) * 1e3), "int32": Tensor((values * 10).astype(np.int32)),
            "nan": Tensor(with_nan), "bfloat16": Tensor(values).astype(ms.bfloat16)}


def test_host_statistics_equal_the_device_reductions(ms):
    from msprobe.mindspore.monitor.tensor_stats import host_stats, stat_vector

    # 16-bit tensors: the device reduces in their own precision, the host in float32 (more accurate)
    tolerance = {"float16": 2e-3, "bfloat16": 1e-2}
    for label, tensor in _tensors(ms).items():
        host = host_stats(tensor, OPS, 1e-8)
        # MindSpore has no bfloat16 reductions on CPU (the host path is the only one there): widen for the reference
        reference = tensor.astype(ms.float32) if label == "bfloat16" else tensor
        device = dict(zip(OPS, stat_vector(reference, OPS, 1e-8).asnumpy().tolist()))
        if label == "nan":  # MindSpore's min/max skip NaN; ours propagate it, as PyTorch's monitor does
            assert all(math.isnan(host[op]) for op in ("min", "max", "mean", "norm")) and host["nans"] == 1.0
            continue
        for op in OPS:
            if math.isnan(device[op]):
                assert math.isnan(host[op]), (label, op)
            else:
                assert host[op] == pytest.approx(device[op], rel=tolerance.get(label, 2e-6), abs=1e-6), (label, op)


def test_host_statistics_recomputed_with_numpy(ms):
    from msprobe.mindspore.monitor.tensor_stats import host_stats

    tensor = _tensors(ms)["float32"]
    array = tensor.asnumpy().astype(np.float64)
    host = host_stats(tensor, OPS, 1e-8)
    assert (host["min"], host["max"]) == (float(array.min()), float(array.max()))
    assert host["norm"] == pytest.approx(float(np.sqrt((array ** 2).sum())), rel=1e-6)
    assert host["mean"] == pytest.approx(float(array.mean()), rel=1e-6)
    assert host["zeros"] == pytest.approx(np.count_nonzero(array == 0) / array.size)
    assert host["nans"] == 0.0
    assert host_stats(_tensors(ms)["nan"], ["nans"], 1e-8) == {"nans": 1.0}


def test_records_keep_the_order_they_were_added(ms):
    from msprobe.mindspore.monitor.tensor_stats import StatBatch

    batch = StatBatch(["norm"], 1e-8)
    tensors = list(_tensors(ms).values())
    for i, tensor in enumerate(tensors):
        batch.add(tensor, "actv", f"t{i}")
    assert batch.on_host is True
    records = batch.records()
    assert [r.name for r in records] == [f"t{i}" for i in range(len(tensors))]
    assert batch.records() == []


@pytest.mark.parametrize("level", ["L0", "L1", "L2"])
def test_grad_probe_host_pass_equals_the_device_reductions(ms, monkeypatch, level):
    """On the CPU float32 gradients go through the one C pass on a host copy; with it switched off the
    MindSpore reductions give the same rows (norm to float32 rounding) and directions."""
    import msprobe.core.monitor.grad_summary as grad_summary_module
    from mindspore import Tensor
    from msprobe.core.config import parse_config
    from msprobe.core.monitor.grad_summary import GradProbeSettings
    from msprobe.mindspore.monitor.grad_probe import gradient_stats

    settings = GradProbeSettings.from_config(parse_config({
        "task": "grad_probe", "dump_path": "unused", "grad_probe": {"grad_level": level, "bounds": [-0.01, 0, 0.01]}}))
    rng = np.random.default_rng(5)
    weight = (rng.standard_normal((24, 12)) * 0.02).astype(np.float32)
    weight[0] = 0.0
    grads = [("w", Tensor(weight)), ("b", Tensor(np.zeros(12, np.float32)))]
    host = gradient_stats(grads, settings)
    monkeypatch.setattr(grad_summary_module, "bucket_stats", None)
    device = gradient_stats(grads, settings)
    norm = -2
    for h, d in zip(host, device):
        assert h.row(level)[:norm] == d.row(level)[:norm] and h.row(level)[-1] == d.row(level)[-1]
        assert h.row(level)[norm] == pytest.approx(d.row(level)[norm], rel=1e-6)
        if level != "L0":
            assert np.array_equal(h.direction, d.direction)
