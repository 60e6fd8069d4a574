"""Widened CPU copies of the tensors the ops of one PtdbgDispatch context read, made once per tensor state.

A step reads most tensors more than once: an activation feeds the next op and again its backward, a weight its
forward and two backward products. Re-running each op in float64 on CPU widened every input again; this cache
hands back the copy made for an earlier op while the tensor is unchanged.

Copies are made per storage (the whole storage widened once; each view is an `as_strided` view of that copy),
keyed by the storage's address and size and the two dtypes. "Unchanged": every op inside the context that may
write (a mutable schema: `add_`, `copy_`, an optimizer's `_foreach_*_`, even through `.data`, which has a
version counter of its own) drops the copies of the storages it was given (`written`), and a re-run of a
mutable op never reads from the cache (it would write into it). The cache keeps each original storage alive
with its copy, so its memory cannot be freed and handed to another tensor under the same address. It is
bounded in bytes (least recently used copies leave first) and dropped when the context exits. Writes that no
ATen op makes (numpy views of a tensor, C extensions) are outside its sight, as they are outside the dispatch
mode's.
"""
from collections import OrderedDict

import torch

__all__ = ["WidenCache"]


def _storage_address(tensor: torch.Tensor):
    try:
        return tensor.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError, TypeError):
        return None


class WidenCache:
    def __init__(self, max_bytes: int = 512 << 20):
        self.max_bytes = max_bytes
        self._copies: "OrderedDict[tuple, tuple]" = OrderedDict()
        self._by_storage = {}
        self._bytes = 0
        self.hits = self.misses = 0

    def widen(self, tensor: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """`tensor` on CPU as `dtype` (a copy), a view of the cached widened storage when one exists.

        The whole storage is widened once, so every view of it (a weight and its transpose, an activation and
        its reshapes) reads the same copy; a view that covers less than half its storage is widened alone."""
        if tensor.dtype == dtype and tensor.device.type == "cpu":
            return tensor.to(device="cpu", dtype=dtype)  # no copy is made: nothing to cache
        try:
            if tensor.layout != torch.strided or tensor.is_conj() or tensor.is_neg():
                return tensor.to(device="cpu", dtype=dtype)
            storage = tensor.untyped_storage()
            itemsize = tensor.element_size()
            total, rest = divmod(storage.nbytes(), itemsize)
            address = storage.data_ptr()
        except (RuntimeError, NotImplementedError, TypeError):  # no storage (a tensor subclass, sparse...)
            return tensor.to(device="cpu", dtype=dtype)
        if rest or not total or 2 * tensor.numel() < total:
            return tensor.to(device="cpu", dtype=dtype)
        key = (address, total, tensor.dtype, tensor.device, dtype)
        entry = self._copies.get(key)
        if entry is not None:
            self._copies.move_to_end(key)
            self.hits += 1
        else:
            self.misses += 1
            flat = tensor.new_empty(0).set_(storage, 0, (total,), (1,))
            entry = (flat, flat.to(device="cpu", dtype=dtype))
            size = entry[1].element_size() * total
            if size <= self.max_bytes:
                self._copies[key] = entry
                self._by_storage.setdefault(address, set()).add(key)
                self._bytes += size
                while self._bytes > self.max_bytes:
                    self._drop(next(iter(self._copies)))
        return entry[1].as_strided(tensor.shape, tensor.stride(), tensor.storage_offset())

    def written(self, tensor: torch.Tensor) -> None:
        """An op may have written `tensor`: forget the copies of its storage."""
        if not self._copies:
            return
        for key in list(self._by_storage.get(_storage_address(tensor), ())):
            self._drop(key)

    def _drop(self, key) -> None:
        _, copy = self._copies.pop(key)
        self._bytes -= copy.element_size() * copy.numel()
        keys = self._by_storage.get(key[0])
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._by_storage[key[0]]

    def clear(self) -> None:
        self._copies.clear()
        self._by_storage.clear()
        self._bytes = 0

    @property
    def cached_bytes(self) -> int:
        return self._bytes
