"""Batched statistics and fingerprints of device tensors: a copy per call, multi-tensor reductions per batch.

At the call, a floating tensor on an accelerator (or any tensor, with the device path forced: MSPROBE_DEVICE_PATH=1)
is copied into a staging buffer of its (dtype, device): two framework ops (`as_strided` + `copy_`), stream-ordered
before anything that runs after the call, so an in-place change, a reuse of the memory or a write that bumps no
version counter later in the step cannot change what is recorded, and nothing of the step's tensors is kept alive.
Each tensor's region starts on a boundary of `ROW_BYTES` bytes and the gap after it stays zero.

When the buffer is full, or at the step's end (`resolve`), the whole buffer is reduced at once:
* statistics: `segment_reduce` max / min / sum and a sum of squares over the tensors' segments (in float64;
  Mean and Norm are rounded to float32 on the host for every dtype but float64, as the host kernel does);
* fingerprints (core/dump/stats.py: XOR of the 64-bit words, sum of (2i+1) * word modulo 2^64): the buffer as
  rows of `ROW_BYTES // 8` words; each row's XOR (`hash_tensor` along the row), plain and weighted sums, then each
  tensor's rows combined with `index_add_` (the XOR as the parity of each bit's count).
The results stay on the device; a step's are copied to the host with one `tolist()` per device.
A tensor larger than a quarter of a buffer, and dtypes other than float32/float64/float16/bfloat16, keep the
per-tensor path of adapter.py.
"""
import math
import struct
import threading

import torch

__all__ = ["DeviceBatches", "Slot", "ROW_BYTES"]

ROW_BYTES = 512  # a tensor's region starts on a row; a row's 64 words are reduced together
_ROW_WORDS = ROW_BYTES // 8
STAGE_BYTES = 32 << 20  # one staging buffer per (dtype, device); a full one is reduced at once
STAGED_DTYPES = frozenset((torch.float32, torch.float64, torch.float16, torch.bfloat16))
_PACK_DOUBLE = struct.Struct("<q")
_UNPACK_DOUBLE = struct.Struct("<d")
_FLOAT32 = struct.Struct("f")


def to_float32(value):
    """The float32 nearest to a Python float (inf beyond float32's range, as float32 arithmetic gives)."""
    try:
        return _FLOAT32.unpack(_FLOAT32.pack(value))[0]
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _as_double(word):
    """A float64 sent to the host as its int64 bits (one copy for statistics and fingerprints together)."""
    return _UNPACK_DOUBLE.unpack(_PACK_DOUBLE.pack(word))[0]


class Slot:
    """A deferred handle: row `index` of batch `batch` (statistics, fingerprint or both)."""
    __slots__ = ("batch", "index")

    def __init__(self, batch, index):
        self.batch, self.index = batch, index

    def stats(self):
        return self.batch.stats[self.index]

    def fingerprint(self):
        return self.batch.fingerprints[self.index]


class _Batch:
    """The tensors of one staging buffer's fill: their segments, then (after `reduce`) the device results, then
    (after the copy) host values."""
    __slots__ = ("segments", "result", "stats", "fingerprints", "want_fingerprints")

    def __init__(self):
        self.segments = []  # (element count, element count with the gap after it, 0-d)
        self.want_fingerprints = False  # whether a tensor of the batch asked for its fingerprint
        self.result = None  # int64 tensor on the device: k rows of max/min/sum/sumsq (float64 bits), then k xor/sum
        self.stats = self.fingerprints = None


class _Stage:
    """The staging buffer of one (dtype, device)."""
    __slots__ = ("buffer", "used", "batch", "align", "round32")

    def __init__(self, dtype, device):
        size = torch.tensor([], dtype=dtype).element_size()
        self.buffer = torch.zeros(STAGE_BYTES // size, dtype=dtype, device=device)
        self.used = 0
        self.batch = _Batch()
        self.align = ROW_BYTES // size
        self.round32 = dtype is not torch.float64


def _contiguous_strides(shape):
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return tuple(reversed(strides))


class DeviceBatches:
    """The staging buffers of one adapter, the batches reduced and not yet copied to the host."""

    def __init__(self):
        self._stages = {}
        self._reduced = []  # _Batch with a device result, not yet on the host
        self._lock = threading.Lock()

    def stage(self, tensor, want_fingerprint):
        """A Slot for `tensor` (a strided tensor of STAGED_DTYPES with elements), or None when it is too large."""
        count = tensor.numel()
        key = (tensor.dtype, tensor.device)
        with self._lock:
            stage = self._stages.get(key)
            if stage is None:
                stage = self._stages[key] = _Stage(tensor.dtype, tensor.device)
            capacity = stage.buffer.numel()
            padded = -(-count // stage.align) * stage.align
            if padded > capacity // 4:
                return None
            if stage.used + padded > capacity:
                self._reduce(stage)
            offset = stage.used
            with torch.no_grad():
                torch.as_strided(stage.buffer, tensor.shape, _contiguous_strides(tensor.shape), offset).copy_(tensor)
            stage.used = offset + padded
            batch = stage.batch
            batch.segments.append((count, padded, tensor.dim() == 0))
            if want_fingerprint:
                batch.want_fingerprints = True
            return Slot(batch, len(batch.segments) - 1)

    def resolve(self):
        """Reduce every staging buffer and copy all results to the host (one copy per device)."""
        with self._lock:
            for stage in self._stages.values():
                if stage.used:
                    self._reduce(stage)
            if not self._reduced:
                return
            by_device = {}
            for batch in self._reduced:
                by_device.setdefault(batch.result.device, []).append(batch)
            self._reduced = []
        for batches in by_device.values():
            results = [batch.result for batch in batches]
            words = (results[0] if len(results) == 1 else torch.cat(results)).tolist()
            start = 0
            for batch in batches:
                end = start + batch.result.numel()
                _fill(batch, words[start:end])
                start = end

    def _reduce(self, stage):
        """The statistics and fingerprints of every tensor in `stage`'s buffer, left on the device; the buffer
        emptied (zeroed where it was used: the gaps after the next tensors must be zero)."""
        batch, used = stage.batch, stage.used
        segments = batch.segments
        data = stage.buffer[:used]
        lengths = []
        for count, padded, _ in segments:
            lengths.append(count)
            lengths.append(padded - count)
        with torch.no_grad():
            values = data.double()
            bounds = _on_device(lengths, data.device)
            high = torch.segment_reduce(values, "max", lengths=bounds, unsafe=True)
            low = torch.segment_reduce(values, "min", lengths=bounds, unsafe=True)
            total = torch.segment_reduce(values, "sum", lengths=bounds, unsafe=True)
            squares = torch.segment_reduce(torch.square(values), "sum", lengths=bounds, unsafe=True)
            stats = torch.stack([high, low, total, squares], 1)[::2].view(torch.int64).reshape(-1)
            if batch.want_fingerprints:
                stats = torch.cat([stats, _fingerprints(data, segments, stage.align)])
            batch.result = stats
            data.zero_()
        batch.stats = stage.round32  # until the copy: whether Mean and Norm are float32 values
        self._reduced.append(batch)
        stage.batch, stage.used = _Batch(), 0


_SHIFTS: dict = {}  # device -> arange(64) (int64)
_WEIGHTS: dict = {}  # device -> the odd numbers 1, 3, ..., 2 * _ROW_WORDS - 1 (int64)


def _on_device(values, device):
    """A list of ints as an int64 tensor on `device` (an accelerator gets it from pinned memory, without waiting)."""
    if device.type == "cuda":
        return torch.tensor(values, dtype=torch.int64, pin_memory=True).to(device, non_blocking=True)
    return torch.tensor(values, dtype=torch.int64, device=device)


def _kept(cache, device, make):
    value = cache.get(device)
    if value is None:
        value = cache[device] = make(device)
    return value


def _fingerprints(data, segments, align):
    """Each segment's (xor, weighted sum) as 2k int64 values on the device (core/dump/stats.py's definition: the
    words of a tensor's bytes, zero-padded to a whole word; the gap after each tensor is zero)."""
    device = data.device
    rows = data.view(torch.int64).view(-1, _ROW_WORDS)
    counts = _on_device([padded // align for _, padded, _ in segments], device)
    ids = torch.repeat_interleave(counts)  # the segment of each row
    first = torch.cumsum(counts, 0) - counts  # each segment's first row
    local = torch.arange(rows.shape[0], device=device) - first[ids]  # a row's position in its segment
    weights = _kept(_WEIGHTS, device, lambda d: torch.arange(1, 2 * _ROW_WORDS, 2, dtype=torch.int64, device=d))
    # word i = 64 * local + c weighs 2i + 1 = 128 * local + (2c + 1)
    partial = (rows * weights).sum(1) + local * (2 * _ROW_WORDS) * rows.sum(1)
    sums = torch.zeros(len(segments), dtype=torch.int64, device=device).index_add_(0, ids, partial)
    shifts = _kept(_SHIFTS, device, lambda d: torch.arange(64, dtype=torch.int64, device=d))
    if hasattr(torch, "hash_tensor"):
        row_xor = torch.hash_tensor(rows, dim=1).view(torch.int64)
    else:  # an older torch: halving along the row
        row_xor = rows
        while row_xor.shape[1] > 1:
            half = row_xor.shape[1] // 2
            row_xor = row_xor[:, :half] ^ row_xor[:, half:]
        row_xor = row_xor.reshape(-1)
    bits = (row_xor.unsqueeze(1) >> shifts) & 1  # a segment's XOR: the parity of each bit's count over its rows
    counts_of_bits = torch.zeros(len(segments), 64, dtype=torch.int64, device=device).index_add_(0, ids, bits)
    xors = ((counts_of_bits & 1) << shifts).sum(1)
    return torch.stack([xors, sums], 1).reshape(-1)


def _fill(batch, words):
    """Host values of a reduced batch from its result's words (k rows of four float64 bits, then k xor/sum)."""
    from msprobe.core.dump.stats import format_fingerprint  # late: core has no torch, this module is torch's

    round32 = batch.stats
    segments = batch.segments
    stats, fingerprints = [], []
    for n, (count, _, scalar) in enumerate(segments):
        high, low, total, squares = (_as_double(word) for word in words[4 * n:4 * n + 4])
        if scalar:
            stats.append((high, high, high, high))
            continue
        mean, norm = total / count, math.sqrt(squares) if squares == squares and squares >= 0 else squares
        if round32:
            mean, norm = to_float32(mean), to_float32(norm)
        stats.append((high, low, mean, norm))
    base = 4 * len(segments)
    for n in range(len(segments) if batch.want_fingerprints else 0):
        fingerprints.append(format_fingerprint(words[base + 2 * n], words[base + 2 * n + 1]))
    batch.stats, batch.fingerprints = stats, fingerprints
