"""The adapter interface a framework implements so that core/dump can describe its values.

Core code never touches a framework tensor directly: it asks the adapter. An adapter is one
object (usually a module-level singleton) with the methods below. Statistics may be *deferred*:
`tensor_stats` returns either the four numbers (a tuple: host memory, nothing to wait for) or an
opaque handle (for torch on an accelerator: a small tensor still on the device), and `resolve_stats`
turns a whole batch of handles into Python numbers at once, so a step pays one device-to-host copy
instead of one per tensor.

Example (a toy adapter for numpy arrays)::

    class NumpyAdapter(DumpAdapter):
        framework = "numpy"
        tensor_suffix = ".npy"
        def is_tensor(self, value):
            return isinstance(value, np.ndarray)
        def tensor_header(self, array):
            return {"type": "numpy.ndarray", "dtype": str(array.dtype), "shape": list(array.shape)}
        def tensor_stats(self, array):
            if not array.size:
                return None
            return (float(array.max()), float(array.min()), float(array.mean()), float(np.linalg.norm(array)))
        def crc32(self, array):
            return f"{zlib.crc32(array.tobytes()):08x}"
        def copy_for_save(self, array):
            return array.copy()
        def save_tensor(self, saved, path):
            np.save(path, saved)
"""

import abc
from typing import Any, Dict, Hashable, List, Optional, Sequence, Tuple

from msprobe.core.dump.stats import fingerprint as stats_fingerprint

from msprobe.core.dump.stats import STAT_KEYS

__all__ = ["DumpAdapter", "STAT_KEYS", "ViewKey"]


class ViewKey(tuple):
    """A content key (`content_identity`) of a view whose elements are its memory's but whose bytes in C order are
    not (a transposed or permuted dense view): equal to the memory's own key, so the statistics, which do not
    depend on the order of the elements, are shared with it; but its type tells the record builder that the
    fingerprint and CRC, which do, are the view's own. `layout` (hashable, e.g. sizes and strides) tells the
    views of one memory apart: views with equal keys and layouts have equal bytes in C order."""

    layout = None  # set on the instance: key = ViewKey(memory_key); key.layout = (sizes, strides)


class DumpAdapter(abc.ABC):
    """Base class of framework adapters; subclasses implement the abstract methods."""

    #: value of the "framework" key of dump.json ("pytorch", "mindspore")
    framework: str = "unknown"
    #: suffix of tensor files in dump_tensor_data/ (".pt", ".npy")
    tensor_suffix: str = ".bin"
    #: the tensor class when `is_tensor` is a plain isinstance check (lets core skip a call per value)
    tensor_class: Optional[type] = None
    #: whether tensor descriptors carry "requires_grad" (torch: yes, MindSpore: no)
    has_requires_grad: bool = False

    @abc.abstractmethod
    def is_tensor(self, value: Any) -> bool:
        """True for a framework tensor (parameters included)."""

    @abc.abstractmethod
    def tensor_header(self, tensor: Any) -> Dict[str, Any]:
        """The descriptor keys that precede the statistics, in order:
        {"type": ..., "dtype": ..., "shape": [...]}."""

    def tensor_facts(self, tensor: Any) -> Tuple[str, str, List[int], Optional[bool], Hashable]:
        """(type, dtype, shape, requires_grad, content key) in one call: what a descriptor needs
        besides statistics. requires_grad is None for frameworks without it. Adapters may fuse this;
        by default it is composed from tensor_header / requires_grad / content_identity."""
        header = self.tensor_header(tensor)
        requires_grad = self.requires_grad(tensor) if self.has_requires_grad else None
        return header["type"], header["dtype"], header["shape"], requires_grad, self.content_identity(tensor)

    def requires_grad(self, tensor: Any) -> bool:
        """Value of the "requires_grad" key (only used when `has_requires_grad`)."""
        return False

    def tensor_identity(self, tensor: Any) -> Hashable:
        """A hashable key equal for tensors of the same memory, layout and version (torch: data pointer,
        dtype, shape, strides, version counter): candidates for one tensor file, confirmed by
        `same_content`. None to never share files."""
        return None

    def content_identity(self, tensor: Any) -> Hashable:
        """Like `tensor_identity`, but equal for every view that holds the same elements in the same
        memory (a reshape, a transpose): the key the statistics cache uses. Tensors with equal keys have equal
        bytes in C order (they share one fingerprint and CRC), unless the key is a `ViewKey`: a view whose
        elements are the memory's in another order (equal statistics, its own fingerprint). Tensors whose
        values differ from their memory's (torch's negative and conjugate bits) must get keys of their own.
        Defaults to `tensor_identity`."""
        return self.tensor_identity(tensor)

    def memory_owner(self, tensor: Any) -> Any:
        """The object whose life keeps the tensor's memory from being reused (torch: its storage);
        cached statistics stay valid while it is alive."""
        return tensor

    @abc.abstractmethod
    def tensor_stats(self, tensor: Any) -> Any:
        """The statistics of stats.STATS (Max/Min/Mean/Norm, in that order): a tuple of Python numbers/bools/None when computed at
        once, None when the tensor has no statistics (no elements, meta tensor), or any other object
        as a deferred handle (e.g. values still on an accelerator) that `resolve_stats` converts."""

    def resolve_stats(self, handles: Sequence[Any]) -> List[Tuple[Any, ...]]:
        """Turn deferred handles into tuples (Max, Min, Mean, Norm) (same order)."""
        return [tuple(handle) for handle in handles]

    @abc.abstractmethod
    def crc32(self, tensor: Any) -> str:
        """CRC-32 of the tensor's raw bytes as 8 lowercase hex digits (summary_mode "md5")."""

    def fingerprint(self, tensor: Any) -> Any:
        """summary_mode "xor": the fingerprint string of stats.fingerprint, or a deferred handle (a value still
        on an accelerator) that `resolve_fingerprints` turns into the string. This default reads the tensor
        as a numpy array."""
        import numpy as np  # late: core adapters need numpy only here
        return stats_fingerprint(np.asarray(tensor))

    def tensor_digest(self, tensor: Any, want_fingerprint: bool, want_owner: bool,
                      key: Hashable = None) -> Tuple[Any, Any, Any]:
        """(tensor_stats, fingerprint or None, memory_owner or None) in one call: what a tensor seen for the
        first time in a step costs. `key` is the content key `tensor_facts` gave the tensor (None: not known), from
        which an adapter may read what it put there instead of asking the framework again. Adapters may fuse it
        (one set of checks, one read of the tensor's facts); by default it is composed from the three methods."""
        return (self.tensor_stats(tensor), self.fingerprint(tensor) if want_fingerprint else None,
                self.memory_owner(tensor) if want_owner else None)

    def random_state(self) -> Optional[str]:
        """The fingerprint of the framework's random-number state now (RNG audit, rng_audit.py), or None."""
        return None

    def resolve_fingerprints(self, handles: List[Any]) -> List[str]:
        """Deferred fingerprints -> strings (same order)."""
        return [str(handle) for handle in handles]

    def fingerprints_now(self, tensors: List[Any]) -> List[Any]:
        """Each tensor's fingerprint as its string (None where `fingerprint` gives none), the deferred ones
        (still on an accelerator) resolved together: for callers that need the values at once."""
        values = [self.fingerprint(tensor) for tensor in tensors]
        deferred = [i for i, value in enumerate(values) if value is not None and type(value) is not str]
        if deferred:
            for i, text in zip(deferred, self.resolve_fingerprints([values[i] for i in deferred])):
                values[i] = text
        return values

    @abc.abstractmethod
    def copy_for_save(self, tensor: Any) -> Any:
        """A snapshot of the tensor that later in-place ops cannot change (saved off-thread)."""

    def same_content(self, snapshot: Any, tensor: Any) -> bool:
        """Whether `tensor` holds exactly the values of `snapshot` (made by `copy_for_save` from a tensor
        of the same dtype and shape); used to write one file for both. False when unsure."""
        return False

    @abc.abstractmethod
    def save_tensor(self, saved: Any, path: str) -> None:
        """Write a snapshot made by `copy_for_save` to `path` (called on the writer thread)."""

    def describe_other(self, value: Any) -> Optional[Dict[str, Any]]:
        """Descriptor of a framework-specific non-tensor value (dtype, device, shape object,
        process group, ...), or None when the value is not framework-specific."""
        return None
