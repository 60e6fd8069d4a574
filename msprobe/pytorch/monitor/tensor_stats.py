"""Statistics of many torch tensors in one step, kept on the device and fetched with one transfer.

`StatBatch.add(tensor, ...)` queues a small float32 vector (the configured ops plus the norm, which the
anomaly rules and the plots always need); `records()` stacks them, calls `.tolist()` once and returns
`StatRecord`s in call order. A tensor added twice in a step (a module's output that is the next module's
input) is computed once, and its second record is marked `duplicate`.

`nans` is the costliest op (a full pass that writes a mask) and almost always 0. For tensors that stay
alive and unchanged until `records()` (`keep=True`: gradients and optimizer-side tensors read before the
step) it is not computed on the device: a finite norm proves there is no NaN, and only a tensor whose norm
is NaN or Inf is counted, at `records()`.
"""
import math
import weakref

import torch

from msprobe.core.monitor.anomaly import StatRecord

__all__ = ["StatBatch", "stat_vector", "compute_ops"]


def compute_ops(ops) -> list:
    """The ops actually computed: the configured ones, then `norm` if missing."""
    return list(ops) + ([] if "norm" in ops else ["norm"])


def stat_vector(tensor: torch.Tensor, ops: list, eps: float, norm=None, lazy_nans=False) -> torch.Tensor:
    """float32 vector of `ops` for one tensor (in the tensor's dtype, then widened); NaN for an empty one.

    lazy_nans: `nans` is left 0 here (the caller counts it later when the norm is not finite).
    """
    t = tensor.detach()
    if t.numel() == 0:
        return torch.full((len(ops),), float("nan"), device=t.device)
    if not (t.is_floating_point() or t.is_complex()):
        t = t.float()
    low = high = None
    values = []
    for op in ops:
        if op in ("min", "max"):
            if low is None:
                low, high = torch.aminmax(t)
            value = low if op == "min" else high
        elif op == "norm":
            value = norm if norm is not None else torch.linalg.vector_norm(t)
        elif op == "mean":
            value = t.mean()
        elif op == "zeros":
            value = torch.count_nonzero(t.abs() < eps) / t.numel()
        elif lazy_nans:
            value = torch.zeros((), dtype=torch.float32, device=t.device)
        else:  # nans
            value = torch.count_nonzero(torch.isnan(t))
        values.append(value.float() if value.dtype != torch.float32 else value)
    return torch.stack(values)


class StatBatch:
    def __init__(self, ops, eps):
        self.ops = compute_ops(ops)
        self.eps = eps
        self._pending = []         # (StatRecord without values, vector or index of the original)
        self._seen = {}            # id(tensor) -> (weakref, position)
        self._kept = {}            # position -> tensor whose nans count waits for its norm
        self.call_id = 0

    def __len__(self):
        return len(self._pending)

    def add(self, tensor, prefix, name, io="", norm=None, dedupe=True, keep=False, **meta) -> StatRecord:
        record = StatRecord(prefix=prefix, name=name, values={}, call_id=self.call_id, io=io,
                            numel=tensor.numel(), **meta)
        self.call_id += 1
        key = id(tensor)
        seen = self._seen.get(key) if dedupe else None
        if seen is not None and seen[0]() is tensor:
            record.duplicate = True
            self._pending.append((record, seen[1]))
            return record
        try:
            if dedupe:
                self._seen[key] = (weakref.ref(tensor), len(self._pending))
        except TypeError:
            pass
        lazy = keep and "nans" in self.ops
        self._pending.append((record, stat_vector(tensor, self.ops, self.eps, norm, lazy_nans=lazy)))
        if lazy:
            self._kept[len(self._pending) - 1] = tensor
        return record

    def add_many(self, tensors, prefix, names, **meta) -> list:
        """Like add() for many tensors, with the norms from one fused kernel."""
        tensors = [t.detach() for t in tensors]
        dense = [t for t in tensors if t.numel() and t.is_floating_point()]
        norms = dict(zip(map(id, dense), torch._foreach_norm(dense))) if dense else {}
        return [self.add(t, prefix, n, norm=norms.get(id(t)), dedupe=False, keep=True, **meta)
                for t, n in zip(tensors, names)]

    def records(self, end_of_step: bool = True) -> list:
        """Every queued record with its values (one device-to-host transfer per device).

        end_of_step=False keeps counting call ids (a step fetched in two parts: before and after the update).
        """
        pending, self._pending, self._seen = self._pending, [], {}
        kept, self._kept = self._kept, {}
        if end_of_step:
            self.call_id = 0
        vectors = [v for _, v in pending if not isinstance(v, int)]
        if not vectors:
            return []
        by_device = {}
        for vector in vectors:
            by_device.setdefault(vector.device, []).append(vector)
        fetched = {device: iter(torch.stack(group).cpu().tolist()) for device, group in by_device.items()}
        resolved = []
        for record, vector in pending:
            if isinstance(vector, int):
                record.values = dict(resolved[vector].values)
            else:
                record.values = dict(zip(self.ops, next(fetched[vector.device])))
            resolved.append(record)
        for position, tensor in kept.items():
            values = resolved[position].values
            if not math.isfinite(values.get("norm", 0.0)):
                values["nans"] = float(torch.count_nonzero(torch.isnan(tensor)).item())
        for record, vector in pending:  # duplicates copy the (now complete) values of their original
            if isinstance(vector, int):
                record.values = dict(resolved[vector].values)
        return resolved
