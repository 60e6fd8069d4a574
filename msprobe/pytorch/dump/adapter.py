"""The torch implementation of the core dump adapter: descriptors, fused statistics, CRC-32, .pt files.

The statistics are those of the core table (msprobe/core/dump/stats.py, in its order), computed as the
reference does: float16/bfloat16 and integer tensors are reduced in float32,
bool tensors give Max = any, Min = all (Mean/Norm null), a 0-d tensor gives its value for all four,
complex tensors are described by their absolute values, empty and meta tensors give nulls.
A dense float32/float64 CPU tensor costs one pass over its memory, by the C kernel of
msprobe/core/dump/native.py (without it: aminmax, sum and BLAS dot products, three passes). CPU results
become Python numbers at once (nothing to synchronise, and no small tensors kept alive for the garbage
collector to scan). On an accelerator a floating tensor is copied at the call into a staging buffer and a
buffer's tensors get their statistics and fingerprints from a few multi-tensor reductions
(device_batch.py), copied to the host once per step; other dtypes and very large tensors keep per-tensor
reductions (four values stacked on the device, copied in bulk). MSPROBE_DEVICE_PATH=1 (tests, benchmarks)
sends CPU tensors through the device path as well.
"""
import ctypes
import math
import os
import struct
import sys
import threading
import zlib

import torch

from msprobe.core.dump.adapter import DumpAdapter, ViewKey
from msprobe.core.dump.direct_io import DirectFile
from msprobe.core.dump import native
from msprobe.core.dump.native import FLOAT16, BFLOAT16, float_stats
from msprobe.core.dump.stats import fingerprint, format_fingerprint
from msprobe.pytorch.dump.device_batch import STAGED_DTYPES, DeviceBatches, Slot, to_float32 as _to_float32

__all__ = ["TorchAdapter", "tensor_statistics", "device_fingerprint"]

_LOW_PRECISION = (torch.float16, torch.bfloat16)
_DOT_DTYPES = (torch.float32, torch.float64)
# dtypes whose host tensors the C kernel reduces, and the element kind it is told
_KERNEL_KINDS = {torch.float32: 4, torch.float64: 8, torch.float16: FLOAT16, torch.bfloat16: BFLOAT16}
_KIND_BYTES = {4: 4, 8: 8, FLOAT16: 2, BFLOAT16: 2}  # element size of each kernel kind
# dtypes whose CPU memory is plain bytes (crc32 reads it in place)
_PLAIN_DTYPES = frozenset((torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8,
                           torch.int16, torch.int32, torch.int64, torch.bool))
_PLAIN_TYPES = (torch.Tensor, torch.nn.Parameter)  # whose data_ptr() is the tensor's own memory
_HEADER_ROOM = 1 << 14  # pickled tensor header of a .pt file (a few hundred bytes; more spills to a plain write)
# tensor classes whose data_ptr() is their own plain memory (a parameter is a tensor with a flag)
_IN_PLACE_TYPES = (torch.Tensor, torch.nn.Parameter)
_COMPLEX_DTYPES = frozenset((torch.complex32, torch.complex64, torch.complex128))  # the only ones a conjugate bit can mark
_DTYPE_NAMES = {}
_EMPTY_FINGERPRINT = format_fingerprint(0, 0)
_SHAPES = {}  # torch.Size -> (tuple, element count): a shared tuple is untracked by the GC after its first collection,
_SHAPES_MAX = 4096  # and then so is every descriptor dict holding it (thousands live until step end); the count
# is the one content keys hold (cheaper than tensor.numel(), a binding call): see _shape_facts
_CPU = "cpu"  # a content key's device for CPU tensors: no torch.device made and hashed per key


def tensor_statistics(tensor):
    """A tuple of 0-d tensors (Max, Min, Mean, Norm) — (any, all) for bool — or None without
    statistics. Nothing is stacked or copied to the host here; `resolve_stats` does that in bulk."""
    data = tensor.detach()
    if data.is_meta or data.numel() == 0:
        return None
    if data.layout != torch.strided:  # sparse / mkldnn: the statistics of the values it stands for
        data = data.to_dense()
    if data.dtype == torch.bool:
        return (data.any(), data.all())
    if data.is_complex():
        data = data.abs()
    if data.dim() == 0:
        value = data.clone()  # later in-place ops must not change the recorded value
        return (value, value, value, value)
    if not data.is_contiguous():
        data = _memory_order(data)
        if not data.is_contiguous():  # a slice or a broadcast: its dense copy's statistics (the same summation)
            data = data.contiguous()
    if not data.is_floating_point():
        data = data.float()
    if data.dtype in _LOW_PRECISION:
        low, high = torch.aminmax(data)
        return (high.float(), low.float(), data.mean(dtype=torch.float32),
                torch.linalg.vector_norm(data, dtype=torch.float32))
    low, high = torch.aminmax(data)
    if data.dtype in _DOT_DTYPES and data.is_cpu:  # a BLAS dot on the host; on a GPU one reduction kernel is less
        flat = data.view(-1) if data.is_contiguous() else data.reshape(-1)
        return (high, low, data.mean(), torch.dot(flat, flat).sqrt())
    return (high, low, data.mean(), torch.linalg.vector_norm(data))


def _host_float_statistics(data):
    """The common case, a dense float32/float64/float16/bfloat16 CPU tensor, without 0-d tensor ops: one
    pass of the C kernel gives Max, Min, Mean and Norm (16-bit floats widened to float32 exactly; sums in
    float32 blocks, then double; float32 results rounded once). Without the kernel: aminmax, torch's sum
    in float64 (Mean and Norm as the kernel gives them, to within a float32 rounding). None when the tensor
    needs the general path."""
    if not data.is_contiguous():
        data = _memory_order(data)
        if not data.is_contiguous():
            # a sliced or broadcast view: one dense copy, then what dense memory gets, with the kernel or without it
            # (the same values give the same statistics whatever the layout; the general path's BLAS dot waited
            # 12-36 ms a call on OpenMP threads on a loaded machine)
            data = data.contiguous()
    count = data.numel()
    if not data.dim():  # a 0-d tensor (a step counter, a loss): its value for all four, as the reference
        value = data.item()
        return (value, value, value, value)
    if not count:
        return None
    if float_stats is not None and type(data) in _IN_PLACE_TYPES and not data.is_neg():
        # plain memory only: a negative-bit view stores the values un-negated, a subclass may have none
        return float_stats(data.data_ptr(), count, _KERNEL_KINDS[data.dtype], None)
    if data.dtype in _LOW_PRECISION:
        return None  # torch's kernels in float32 (tensor_statistics)
    flat = data.view(-1)
    low, high = torch.aminmax(flat)
    # sums in float64, as the kernel's (float32 blocks, then double) are: Mean and Norm then do not depend on whether
    # the kernel was built (a float32 sum of values that cancel drifts by more than compare allows a Mean)
    total = flat.sum(dtype=torch.float64).item()
    norm = torch.linalg.vector_norm(flat, dtype=torch.float64).item()
    if data.dtype is torch.float32:
        # float32 division and square root, correctly rounded (double has the bits to spare)
        return (high.item(), low.item(), _to_float32(total / count), _to_float32(norm))
    return (high.item(), low.item(), total / count, norm)


_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _raw_bits(data):
    """An integer view of a tensor's bits: equality that tells -0.0 from 0.0 and matches NaN with itself."""
    if data.is_complex():
        data = torch.view_as_real(data)
    if data.is_floating_point():
        data = data.view(_BITS[data.element_size()])
    return data


def _fingerprint_bytes(data):
    """The tensor's bytes in C order as a flat uint8 tensor, on its own device (a copy only for views)."""
    if data.layout != torch.strided:
        data = data.to_dense()
    if data.is_neg() or data.is_conj():  # a lazy view: its memory is not its value (no bytes view either)
        data = data.resolve_neg().resolve_conj()
    if not data.is_contiguous():
        data = data.contiguous()
    return data.reshape(-1).view(torch.uint8)


def device_fingerprint(data):
    """summary_mode "xor" with torch integer ops where the tensor lives (nothing copied to the host):
    two 0-d int64 tensors (XOR of the 64-bit words, sum of (2i+1) * word, both modulo 2^64, as torch's
    int64 arithmetic wraps), the definition of core/dump/stats.py."""
    raw = _fingerprint_bytes(data)
    pad = -raw.numel() % 8
    if pad or raw.storage_offset() % 8:
        raw = torch.cat([raw, raw.new_zeros(pad)])  # also aligns a view that starts mid-word
    words = raw.view(torch.int64)
    total = (words * _odd_weights(words.numel(), words.device)).sum()
    return (_xor_words(words), total)  # two 0-d tensors: resolve_fingerprints stacks a whole step's at once


_WEIGHTS = {}  # device -> the odd numbers 1, 3, 5, ... (int64) on it, for tensors of up to _WEIGHTS_MAX words
_WEIGHTS_MAX = 1 << 20  # 8 MB a device; a larger tensor makes its own (one more kernel beside its long read)


def _odd_weights(count, device):
    """The weights 2i+1 of the fingerprint's sum for `count` words, on `device`: a slice of a kept tensor (no
    kernel launch for the arange of every small tensor of an L2 dump)."""
    if count > _WEIGHTS_MAX:
        return torch.arange(1, 2 * count, 2, dtype=torch.int64, device=device)
    kept = _WEIGHTS.get(device)
    if kept is None or kept.numel() < count:
        size = min(_WEIGHTS_MAX, max(1024, 1 << (count - 1).bit_length()))
        kept = _WEIGHTS[device] = torch.arange(1, 2 * size, 2, dtype=torch.int64, device=device)
    return kept[:count]


def _xor_by_halving(words):
    """XOR of a 1-D int64 tensor as a 0-d tensor, for a torch without hash_tensor: about 2 log2(n) small
    kernels (torch has no XOR reduction before it)."""
    carry = words.new_zeros(1)
    while words.numel() > 1:
        if words.numel() % 2:
            carry = carry ^ words[-1:]
            words = words[:-1]
        half = words.numel() // 2
        words = words[:half] ^ words[half:]
    return (words ^ carry).reshape(())


def _xor_by_hash_tensor(words):
    """XOR of a 1-D int64 tensor in one kernel: torch.hash_tensor's mode 0 is the XOR of the elements
    widened to 64 bits, which for int64 words are the words themselves (its result is uint64: the same bits)."""
    return torch.hash_tensor(words).view(torch.int64)


_xor_words = _xor_by_hash_tensor if hasattr(torch, "hash_tensor") else _xor_by_halving


def _dtype_name(dtype):
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = str(dtype)
    return name


def _shape_facts(size):
    """(one shared tuple, the element count a content key holds) per torch.Size (or its tuple; see _SHAPES). The count
    is -1 for 0-d: a 0-d tensor's statistics (its value four times, as the reference gives) are not those of a
    1-element view of its memory (Norm = |value|)."""
    facts = _SHAPES.get(size)
    if facts is None:
        if len(_SHAPES) >= _SHAPES_MAX:
            _SHAPES.clear()
        facts = _SHAPES[size] = (tuple(size), math.prod(size) if size else -1)
    return facts


def _shape_tuple(size):
    """One shared tuple per torch.Size (see _SHAPES)."""
    return (_SHAPES.get(size) or _shape_facts(size))[0]


def _content_key(tensor, dtype, shape):
    """Statistics-cache key (core/dump/adapter.py, content_identity): a dense tensor in any dimension order covers
    exactly [data_ptr, data_ptr + numel) and its statistics (reduced in memory order) are those of every other
    dense view of that memory at the same version; a dense view in another dimension order gets a ViewKey (its
    bytes in C order are its own). A view with the negative or conjugate bit reads other values than its memory
    holds: its key names its layout and bits. None for tensors without a version counter or data pointer.
    (TorchAdapter.tensor_facts inlines the common case.)"""
    try:
        if tensor.is_neg() or (dtype in _COMPLEX_DTYPES and tensor.is_conj()):
            return (tensor.data_ptr(), dtype, (shape, tensor.stride()), tensor._version,
                    _CPU if tensor.is_cpu else tensor.device, tensor.is_neg(), tensor.is_conj())
        count = (_SHAPES.get(shape) or _shape_facts(shape))[1]
        if tensor.is_contiguous():
            return (tensor.data_ptr(), dtype, count, tensor._version, _CPU if tensor.is_cpu else tensor.device)
        return _strided_key(tensor, dtype, shape, shape, count)
    except RuntimeError:  # inference tensors have no version counter; meta/sparse have no data_ptr
        return None


def _strided_key(tensor, dtype, size, shape, count):
    """_content_key of a tensor that is not contiguous (and has no negative or conjugate bit): a ViewKey when it is
    dense in another dimension order, else its memory with its layout."""
    strides = tensor.stride()
    device = _CPU if tensor.is_cpu else tensor.device
    if _dense_order(tensor, size, strides)[1]:
        key = ViewKey((tensor.data_ptr(), dtype, count, tensor._version, device))
        key.layout = (shape, strides)
        return key
    return (tensor.data_ptr(), dtype, (shape, strides), tensor._version, device)


_ORDERS = {}  # (sizes, strides) -> (memory order of the dimensions, whether that permutation is contiguous)
_ORDERS_MAX = 4096


def _dense_order(data, size=None, strides=None):
    """The dimension order that follows `data`'s memory, and whether `data` permuted to it is contiguous
    (a dense tensor in another dimension order). Both depend only on sizes and strides (given when the caller
    has them), so they are worked out once per layout: a transformer step meets the same few dozen layouts
    again and again."""
    if strides is None:
        size, strides = data.shape, data.stride()
    key = (size, strides)
    hit = _ORDERS.get(key)
    if hit is None:
        order = sorted(range(len(strides)), key=lambda d: (-strides[d], -size[d]))
        if len(_ORDERS) >= _ORDERS_MAX:
            _ORDERS.clear()
        hit = _ORDERS[key] = (order, data.permute(order).is_contiguous())
    return hit


def _memory_order(data):
    """`data` permuted so that its dimensions follow memory order: a transposed or permuted dense tensor
    becomes contiguous without a copy. Whole-tensor reductions do not depend on the dimension order
    (torch's reductions iterate in memory order anyway), but aminmax is ~15x slower on a transposed view."""
    order, dense = _dense_order(data)
    return data.permute(order) if dense else data


class PlacedShape(tuple):
    """A DTensor's local shape, carrying its placement for the rank's layout.json (core/dump/record.py):
    `placement` is 'Shard(d)' / 'Replicate' / 'Partial' (one mesh dimension; else the list as text),
    `mesh` the mesh's ranks in coordinate order."""
    placement = mesh = None


def _is_dtensor(tensor):
    """DTensor is looked up in sys.modules: no DTensor exists before torch.distributed.tensor is imported,
    and importing it here would be slow."""
    dtensor = getattr(sys.modules.get("torch.distributed.tensor"), "DTensor", None)
    return dtensor is not None and isinstance(tensor, dtensor)


def _dtensor_local(tensor):
    """(local shard, its PlacedShape) for a DTensor, else None."""
    if not _is_dtensor(tensor):
        return None
    local = tensor._local_tensor
    placements = [_placement_text(p) for p in tensor.placements]
    shape = PlacedShape(local.shape)
    shape.placement = placements[0] if len(placements) == 1 else str(placements)
    shape.mesh = [int(r) for r in tensor.device_mesh.mesh.flatten().tolist()]
    return local, shape


def _placement_text(placement):
    if placement.is_shard():
        return f"Shard({placement.dim})"
    if placement.is_replicate():
        return "Replicate"
    if placement.is_partial():
        op = getattr(placement, "reduce_op", "sum")
        return "Partial" if op == "sum" else f"Partial({op})"
    return str(placement)


def local_shard(tensor):
    """A DTensor's local shard (the rank's own memory, what its statistics describe); any other tensor."""
    if type(tensor) in _PLAIN_TYPES or not _is_dtensor(tensor):
        return tensor
    return tensor._local_tensor  # only the shard: placements are read once, in tensor_facts


class _CaptureWriter:
    """File object that keeps what torch.save writes, up to `keep` bytes (the rest is only counted)."""

    def __init__(self, keep):
        self.keep, self.parts, self.size = keep, [], 0

    def write(self, data):
        view = memoryview(data).cast("B")
        room = self.keep - self.size
        if room > 0:
            self.parts.append(bytes(view[:room]))
        self.size += len(view)
        return len(view)

    def flush(self):
        pass


class _PtHeaders:
    """The bytes torch.save (non-zip format) writes before a tensor's data, without running torch.save.

    They depend on the tensor's dtype, shape, strides, offset and storage size, and on the storage's
    key, the decimal address `str(storage._cdata)`, which appears twice as a pickled string. The first
    tensor of a kind is saved by torch.save (its bytes become the template), the second is checked
    against torch.save too; from then on the key is substituted in the template (~40x cheaper, the
    Python of torch.save being most of the cost of a small file). A kind whose check fails keeps
    using torch.save.
    """

    def __init__(self):
        self._templates = {}  # kind -> (header bytes, pickled key) or None (not templatable)
        self._checked = set()
        self._lock = threading.Lock()

    @staticmethod
    def _rendered(tensor, storage):
        capture = _CaptureWriter(1 << 16)
        torch.save(tensor, capture, _use_new_zipfile_serialization=False)
        header_size = capture.size - storage.nbytes()
        header = b"".join(capture.parts)[:header_size]
        return header if len(header) == header_size else None

    def header(self, tensor, storage):
        """The header bytes, or None when torch.save must write the whole file."""
        if type(tensor) is not torch.Tensor or tensor.requires_grad or not storage.nbytes():
            return None
        key = str(storage._cdata).encode()
        pickled_key = b"X" + struct.pack("<I", len(key)) + key
        kind = (tensor.dtype, tuple(tensor.shape), tensor.stride(), tensor.storage_offset(), storage.nbytes(),
                len(key))
        with self._lock:
            template = self._templates.get(kind, False)
        if template is None:
            return None
        if template is False:
            rendered = self._rendered(tensor, storage)
            if rendered is None or rendered.count(pickled_key) != 2:
                rendered_template = None
            else:
                rendered_template = (rendered, pickled_key)
            with self._lock:
                self._templates[kind] = rendered_template
            return rendered
        header = template[0].replace(template[1], pickled_key)
        if kind not in self._checked:
            ok = self._rendered(tensor, storage) == header
            with self._lock:
                self._checked.add(kind)
                if not ok:
                    self._templates[kind] = None
            if not ok:
                return None
        return header


_PT_HEADERS = _PtHeaders()


class TorchAdapter(DumpAdapter):
    """Describes torch values for msprobe.core.dump."""

    framework = "pytorch"
    tensor_suffix = ".pt"
    tensor_class = torch.Tensor
    has_requires_grad = True

    def __init__(self):
        # MSPROBE_DEVICE_PATH=1: CPU tensors take the accelerator's path too (for tests and benchmarks without one)
        self.device_path_forced = os.environ.get("MSPROBE_DEVICE_PATH") == "1"
        self._batches = DeviceBatches()

    def _deferred(self, tensor, want_fingerprint):
        """(statistics handle, fingerprint handle or None) of a tensor on the device path: a staged copy (one Slot
        for both) where device_batch takes it, else per-tensor reductions left on the device."""
        if (tensor.dtype in STAGED_DTYPES and tensor.layout is torch.strided and not tensor.is_meta
                and tensor.numel()):
            slot = self._batches.stage(tensor, want_fingerprint)
            if slot is not None:
                return slot, (slot if want_fingerprint else None)
        values = tensor_statistics(tensor)
        stats = None if values is None else torch.stack(values)
        if not want_fingerprint:
            return stats, None
        data = tensor.detach()
        if data.is_meta:
            return stats, None
        return stats, (device_fingerprint(data) if data.numel() else _EMPTY_FINGERPRINT)

    def is_tensor(self, value):
        return isinstance(value, torch.Tensor)

    def tensor_header(self, tensor):
        # a tuple (written as a JSON list) keeps the descriptor free of mutable containers
        return {"type": "torch.Tensor", "dtype": _dtype_name(tensor.dtype), "shape": _shape_tuple(tensor.shape)}

    def requires_grad(self, tensor):
        return bool(tensor.requires_grad)

    def tensor_facts(self, tensor):
        # tensor_header + requires_grad + content_identity in one call: this runs for every tensor, so
        # the two lookups are inlined (their helpers run only on a miss)
        if type(tensor) not in _PLAIN_TYPES:
            found = _dtensor_local(tensor)
            if found is not None:  # a DTensor is described by its local shard (its own memory and key)
                local, shape = found
                return ("torch.Tensor", _dtype_name(local.dtype), shape, tensor.requires_grad,
                        _content_key(local, local.dtype, tuple(shape)))
        dtype = tensor.dtype
        size = tensor.shape
        shape, count = _SHAPES.get(size) or _shape_facts(size)
        name = _DTYPE_NAMES.get(dtype) or _dtype_name(dtype)
        try:  # _content_key inlined but for negative, conjugate and complex tensors
            if tensor.is_neg() or dtype in _COMPLEX_DTYPES:
                key = _content_key(tensor, dtype, shape)
            elif tensor.is_contiguous():
                key = (tensor.data_ptr(), dtype, count, tensor._version, _CPU if tensor.is_cpu else tensor.device)
            else:
                key = _strided_key(tensor, dtype, size, shape, count)
        except RuntimeError:  # inference tensors have no version counter; meta/sparse have no data_ptr
            key = None
        return "torch.Tensor", name, shape, tensor.requires_grad, key

    def tensor_identity(self, tensor):
        # memory + layout + version: a gradient and its view-of-the-same-memory twin (what the
        # next op's hook receives) share one tensor file
        tensor = local_shard(tensor)
        try:
            return (tensor.data_ptr(), tensor.dtype, tuple(tensor.shape), tensor.stride(), tensor._version,
                    tensor.device)
        except RuntimeError:  # inference tensors have no version counter; meta/sparse have no data_ptr
            return None

    def content_identity(self, tensor):
        tensor = local_shard(tensor)
        return _content_key(tensor, tensor.dtype, tuple(tensor.shape))

    def memory_owner(self, tensor):
        # torch keeps one Python object per storage for as long as the storage lives, so a weak
        # reference to it says whether the memory is still the same allocation, however many
        # short-lived tensor objects (gradients handed to hooks, views) pointed into it
        tensor = local_shard(tensor)
        try:
            return tensor.untyped_storage()
        except (RuntimeError, NotImplementedError):
            return tensor

    def tensor_stats(self, tensor):
        tensor = local_shard(tensor)
        if self.device_path_forced or not tensor.is_cpu:
            return self._deferred(tensor, False)[0]
        kind = _KERNEL_KINDS.get(tensor.dtype)
        if kind is not None and tensor.is_cpu and tensor.layout is torch.strided:
            # a plain tensor or parameter that is dense in some dimension order is read in place, in memory
            # order (what _host_float_statistics gets from the permuted view, whose data_ptr is the same);
            # detach() only for 0-d tensors and other subclasses
            in_place = type(tensor) in _IN_PLACE_TYPES
            contiguous = tensor.is_contiguous()
            if in_place and float_stats is not None and tensor.dim() and not tensor.is_neg():
                count = tensor.numel()
                if count and (contiguous or _dense_order(tensor)[1]):
                    return float_stats(tensor.data_ptr(), count, kind, None)
                if count and native.float_stats_strided is not None:  # a slice or a broadcast: gathered in C
                    return native.float_stats_strided(tensor.data_ptr(), kind, tensor.shape, tensor.stride())
            plain = in_place and contiguous
            stats = _host_float_statistics(tensor if plain else tensor.detach())
            if stats is not None:
                return stats
        values = tensor_statistics(tensor)
        if values is None:
            return None
        if tensor.is_cpu:
            if len(values) == 2:
                return (values[0].item(), values[1].item(), None, None)
            return (values[0].item(), values[1].item(), values[2].item(), values[3].item())
        return torch.stack(values)  # deferred: resolve_stats copies a whole step at once

    def tensor_digest(self, tensor, want_fingerprint, want_owner, key=None):
        # the common case of a dump, a dense float CPU tensor (or parameter) first seen in the step: read once for
        # both kernels. Its content key (tensor_facts) already says it: a plain tuple with an element count (not a
        # layout) is a contiguous tensor without negative or conjugate bit, with data_ptr key[0], count key[2] (-1
        # for 0-d, whose statistics the general path gives), dtype key[1] and device key[4] (_CPU; nothing asked of
        # torch again); without a key, the same facts are checked through torch's bindings (~1 us a call)
        if self.device_path_forced:
            tensor = local_shard(tensor)
            return self._deferred(tensor, want_fingerprint) + ((self.memory_owner(tensor) if want_owner else None),)
        if type(tensor) in _IN_PLACE_TYPES and float_stats is not None and native.fingerprint is not None:
            if type(key) is tuple:
                count, kind = key[2], _KERNEL_KINDS.get(key[1])
                if type(count) is int and count > 0 and kind is not None and key[4] is _CPU:
                    return self._digest_in_place(tensor, key[0], count, kind, want_fingerprint, want_owner)
            elif key is None:
                kind = _KERNEL_KINDS.get(tensor.dtype)
                if (kind is not None and tensor.is_cpu and tensor.layout is torch.strided and tensor.dim()
                        and tensor.is_contiguous() and not tensor.is_neg()):
                    count = tensor.numel()
                    if count:
                        return self._digest_in_place(tensor, tensor.data_ptr(), count, kind, want_fingerprint,
                                                     want_owner)
        tensor = local_shard(tensor)
        if not tensor.is_cpu:  # an accelerator's tensor: one staged copy for both
            return self._deferred(tensor, want_fingerprint) + ((self.memory_owner(tensor) if want_owner else None),)
        return super().tensor_digest(tensor, want_fingerprint, want_owner, key)

    @staticmethod
    def _digest_in_place(tensor, address, count, kind, want_fingerprint, want_owner):
        """tensor_digest of `count` elements of kernel kind `kind` read in place at `address`."""
        owner = tensor.untyped_storage() if want_owner else None
        if not want_fingerprint:
            return float_stats(address, count, kind, None), None, owner
        if native.stats_fingerprint is not None:  # one pass over the memory
            stats, fingerprint = native.stats_fingerprint(address, count, kind)
            return stats, fingerprint, owner
        fingerprint = format_fingerprint(*native.fingerprint(address, count * _KIND_BYTES[kind]))
        return float_stats(address, count, kind, None), fingerprint, owner

    def resolve_stats(self, handles):
        groups = {}
        results = [None] * len(handles)
        staged = False
        for position, handle in enumerate(handles):
            if type(handle) is Slot:
                staged = True
            else:
                groups.setdefault((handle.dtype, handle.device, handle.numel()), []).append(position)
        if staged:
            self._batches.resolve()
            for position, handle in enumerate(handles):
                if type(handle) is Slot:
                    results[position] = handle.stats()
        for positions in groups.values():
            rows = torch.stack([handles[p] for p in positions]).tolist()
            for p, row in zip(positions, rows):
                results[p] = tuple(row) if len(row) == 4 else (row[0], row[1], None, None)
        return results

    def crc32(self, tensor):
        tensor = local_shard(tensor)
        if (type(tensor) is torch.Tensor and tensor.is_cpu and tensor.layout is torch.strided
                and tensor.dtype in _PLAIN_DTYPES and tensor.is_contiguous() and not tensor.is_neg()
                and not tensor.is_conj() and tensor.numel()):
            # the memory itself: the same bytes as the copy below, without six tensor ops
            memory = (ctypes.c_char * (tensor.numel() * tensor.element_size())).from_address(tensor.data_ptr())
            return f"{zlib.crc32(memory) & 0xFFFFFFFF:08x}"
        data = tensor.detach()
        if data.is_meta:
            return "00000000"
        # a negative or conjugate view stores other values than it reads: resolved (a copy) like any other view
        raw = data.cpu().resolve_neg().resolve_conj().contiguous().reshape(-1).view(torch.uint8).numpy()
        return f"{zlib.crc32(raw) & 0xFFFFFFFF:08x}"

    def fingerprint(self, tensor):
        tensor = local_shard(tensor)
        if self.device_path_forced or not tensor.is_cpu:
            return self._deferred(tensor, True)[1]
        if (native.fingerprint is not None and type(tensor) in _PLAIN_TYPES and tensor.is_cpu
                and tensor.layout is torch.strided and tensor.dtype in _PLAIN_DTYPES
                and not tensor.is_neg() and not tensor.is_conj()):
            # the common case, read in place: the same bytes as below without detach/reshape/view (three
            # tensor ops, most of the fingerprint's cost for the small tensors of an L2 dump); a view that is
            # not contiguous (a transpose, a slice, a broadcast) is walked in C order by the C kernel
            if tensor.is_contiguous():
                size = tensor.numel() * tensor.element_size()
                return format_fingerprint(*native.fingerprint(tensor.data_ptr(), size)) if size else _EMPTY_FINGERPRINT
            if native.fingerprint_strided is not None:
                return format_fingerprint(*native.fingerprint_strided(tensor.data_ptr(), tensor.element_size(),
                                                                      tensor.shape, tensor.stride()))
        data = tensor.detach()
        if data.is_meta:
            return None
        if data.numel() == 0:
            return _EMPTY_FINGERPRINT
        raw = _fingerprint_bytes(data)
        if native.fingerprint is not None:
            return format_fingerprint(*native.fingerprint(raw.data_ptr(), raw.numel()))
        return fingerprint(raw.numpy())  # without the C kernel: numpy

    def random_state(self):
        # the CPU generator's state (a few KB, read in place) and each initialised CUDA generator's (16 bytes)
        states = [torch.random.default_generator.get_state()]
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            states.extend(torch.cuda.get_rng_state_all())
        return fingerprint(torch.cat(states).numpy())

    def resolve_fingerprints(self, handles):
        groups = {}
        results = [None] * len(handles)
        staged = False
        for position, handle in enumerate(handles):
            if type(handle) is Slot:
                staged = True
            elif type(handle) is str:
                results[position] = handle
            else:
                groups.setdefault(handle[0].device, []).append(position)
        if staged:
            self._batches.resolve()
            for position, handle in enumerate(handles):
                if type(handle) is Slot:
                    results[position] = handle.fingerprint()
        for positions in groups.values():
            words = torch.stack([word for p in positions for word in handles[p]]).tolist()
            for n, p in enumerate(positions):
                results[p] = format_fingerprint(words[2 * n], words[2 * n + 1])
        return results

    def copy_for_save(self, tensor):
        tensor = local_shard(tensor)
        data = tensor.detach()
        if data.device.type != "cpu":
            return data.to("cpu")
        return data.clone()

    def same_content(self, snapshot, tensor):
        tensor = local_shard(tensor)
        data = tensor.detach()
        if data.device != snapshot.device:
            data = data.to(snapshot.device)
        return bool(torch.equal(_raw_bits(snapshot), _raw_bits(data)))

    def save_tensor(self, saved, path):
        # torch's non-zip format, byte for byte: ~2x faster than the zip format for the many small files of
        # a dump (torch.load reads both). Its header comes from _PT_HEADERS (torch.save's Python was most
        # of a small file's cost), the data straight from the storage. Handed a plain file object, torch
        # writes holding the GIL (the training thread then stalls); DirectFile copies and writes without
        # it: O_DIRECT from an aligned buffer (core/dump/direct_io.py), else os.write.
        storage = saved.untyped_storage()
        header = _PT_HEADERS.header(saved, storage)
        with DirectFile(path, storage.nbytes() + (len(header) if header else _HEADER_ROOM)) as handle:
            if header is None:
                torch.save(saved, handle, _use_new_zipfile_serialization=False)
            else:
                handle.write(header)
                handle.write_from(storage.data_ptr(), storage.nbytes())

    def describe_other(self, value):
        if isinstance(value, torch.dtype):
            return {"type": "torch.dtype", "value": str(value)}
        if isinstance(value, torch.device):
            return {"type": "torch.device", "value": str(value)}
        if isinstance(value, torch.Size):
            return {"type": "torch.Size", "value": list(value)}
        if isinstance(value, torch.memory_format):
            return {"type": "torch.memory_format", "format": str(value).replace("torch.", "")}
        if isinstance(value, torch.layout):
            return {"type": "torch.layout", "value": str(value)}
        if isinstance(value, torch.Generator):
            return {"type": "torch.Generator", "value": str(value.device)}
        return _describe_distributed(value)



def _describe_distributed(value):
    import torch.distributed as dist

    if not dist.is_available():
        return None
    if isinstance(value, dist.ProcessGroup):
        try:
            ranks = dist.get_process_group_ranks(value)
        except (RuntimeError, ValueError):
            ranks = []
        return {"type": "torch.ProcessGroup", "group_ranks": ranks}
    if isinstance(value, dist.ReduceOp) or type(value).__name__ == "RedOpType":
        return {"type": "torch.distributed.ReduceOp", "value": str(value).split(".")[-1]}
    return None
