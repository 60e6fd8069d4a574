"""Statistics of MindSpore tensors for the monitor, computed on the device and fetched once per step."""
import numpy as np
from mindspore import Tensor, ops
from mindspore import dtype as mstype

from msprobe.core.monitor.anomaly import StatRecord

__all__ = ["StatBatch", "stat_vector", "current_rank", "is_pynative"]


def current_rank() -> int:
    try:
        from mindspore.communication import get_rank

        return int(get_rank())
    except Exception:  # noqa: BLE001 - communication not initialised: a single process
        return 0


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


class StatBatch:
    def __init__(self, ops_list, eps):
        self.ops = list(ops_list) + ([] if "norm" in ops_list else ["norm"])
        self.eps = eps
        self._pending = []
        self.call_id = 0

    def add(self, tensor, prefix, name, io="", **meta) -> StatRecord:
        record = StatRecord(prefix=prefix, name=name, values={}, call_id=self.call_id, io=io,
                            numel=int(tensor.size), **meta)
        self.call_id += 1
        self._pending.append((record, stat_vector(tensor, self.ops, self.eps)))
        return record

    def records(self) -> list:
        pending, self._pending = self._pending, []
        self.call_id = 0
        if not pending:
            return []
        table = ops.stack([v for _, v in pending]).asnumpy().tolist()
        for (record, _), row in zip(pending, table):
            record.values = dict(zip(self.ops, row))
        return [record for record, _ in pending]
