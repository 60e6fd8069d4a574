"""Statistics of MindSpore tensors for the monitor.

On the CPU they are computed on a host copy at once (min, max, mean and norm in one pass of the C kernel of
msprobe/core/dump/native.py, as the dump does): MindSpore's PyNative reductions cost tens of microseconds
each, eight of them per tensor made activation monitoring 3-5x slower than training. On other devices
they are computed there and fetched once per step.
"""
import numpy as np
from mindspore import Tensor, ops
from mindspore import dtype as mstype

from msprobe.core.monitor.anomaly import StatRecord
from msprobe.core.dump.array_stats import array_statistics
from msprobe.mindspore.dump.adapter import to_numpy

__all__ = ["StatBatch", "stat_vector", "host_stats", "is_pynative", "on_cpu"]


def is_pynative() -> bool:
    import mindspore

    return mindspore.get_context("mode") == mindspore.PYNATIVE_MODE


def _float(t):
    return t if t.dtype == mstype.float32 else t.astype(mstype.float32)


def stat_vector(tensor: Tensor, ops_list: list, eps: float) -> Tensor:
    """float32 vector of `ops_list` for one tensor; NaN for an empty one."""
    if tensor.size == 0:
        return Tensor(np.full((len(ops_list),), np.nan, dtype=np.float32))
    t = tensor if tensor.dtype in (mstype.float16, mstype.bfloat16, mstype.float32, mstype.float64) \
        else tensor.astype(mstype.float32)
    values = []
    for op in ops_list:
        if op == "min":
            value = t.min()
        elif op == "max":
            value = t.max()
        elif op == "norm":
            value = ops.norm(t)
        elif op == "mean":
            value = t.mean()
        elif op == "zeros":
            value = (ops.abs(t) < eps).astype(mstype.float32).sum() / t.size
        else:
            value = ops.isnan(t).astype(mstype.float32).sum()
        values.append(_float(value).reshape(()))
    return ops.stack(values)


def host_stats(tensor: Tensor, ops_list: list, eps: float) -> dict:
    """{op: value} of `ops_list` from a host copy of `tensor` (one C pass for min/max/mean/norm; zeros and nans
    only when asked for); NaN for an empty tensor."""
    array = to_numpy(tensor).reshape(-1)
    if array.size == 0:
        return {op: float("nan") for op in ops_list}
    if array.dtype.kind not in "fc" or array.dtype.itemsize < 4:
        array = array.astype(np.float32)  # float16 too: numpy would compare it with eps rounded to float16 (0)
    high, low, mean, norm = array_statistics(array)
    values = {"max": high, "min": low, "mean": mean, "norm": norm}
    out = {}
    for op in ops_list:
        if op in values:
            out[op] = float(values[op])
        elif op == "zeros":
            out[op] = float(np.float32(np.count_nonzero(np.abs(array) < eps)) / np.float32(array.size))
        else:  # nans
            out[op] = float(np.count_nonzero(np.isnan(array)))
    return out


def on_cpu() -> bool:
    """Whether MindSpore runs on the CPU (statistics are then cheaper on a host copy)."""
    import mindspore

    return mindspore.get_context("device_target") == "CPU"


class StatBatch:
    def __init__(self, ops_list, eps):
        self.ops = list(ops_list) + ([] if "norm" in ops_list else ["norm"])
        self.eps = eps
        self._pending = []
        self._done = []
        self.call_id = 0
        self.on_host = None  # decided at the first tensor: the device is set after the monitor may be built

    def add(self, tensor, prefix, name, io="", **meta) -> StatRecord:
        record = StatRecord(prefix=prefix, name=name, values={}, call_id=self.call_id, io=io,
                            numel=int(tensor.size), **meta)
        self.call_id += 1
        if self.on_host is None:
            self.on_host = on_cpu()
        if self.on_host:
            record.values = host_stats(tensor, self.ops, self.eps)
            self._done.append(record)
        else:
            self._pending.append((record, stat_vector(tensor, self.ops, self.eps)))
        return record

    def records(self) -> list:
        """The records added since the last call, in the order they were added."""
        pending, self._pending = self._pending, []
        done, self._done = self._done, []
        self.call_id = 0
        if pending:
            table = ops.stack([v for _, v in pending]).asnumpy().tolist()
            for (record, _), row in zip(pending, table):
                record.values = dict(zip(self.ops, row))
        return sorted(done + [record for record, _ in pending], key=lambda r: r.call_id)
