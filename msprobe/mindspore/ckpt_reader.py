"""MindSpore `.ckpt` checkpoints for ckpt_compare (a protobuf file: MindSpore reads it whole; no code runs).

Before MindSpore builds anything, the file's records are scanned in place (memory-mapped, no tensor bytes
copied): each parameter's dims must need exactly the bytes stored for it (exact integer arithmetic), so a
30-byte file cannot declare a [20000, 20000] tensor that MindSpore would allocate."""
import mmap
import zipfile
from typing import Dict, Iterator, List, Optional, Tuple

from msprobe.core.bounded_walk import check_tensor_bytes
from msprobe.core.ckpt_compare.readers import CheckpointError, StoredTensor
from msprobe.core.errors import MsprobeError

__all__ = ["open_mindspore_checkpoint"]


# bytes per element of Checkpoint.proto's tensor_type names ('str' values are not tensors)
_ITEMSIZE = {"Int8": 1, "UInt8": 1, "Bool": 1, "Int16": 2, "UInt16": 2, "Float16": 2, "BFloat16": 2, "Int32": 4,
             "UInt32": 4, "Float32": 4, "Int64": 8, "UInt64": 8, "Float64": 8, "Complex64": 8, "Complex128": 16}


class _Malformed(Exception):
    """Not protobuf wire format (MindSpore's own loader says what is wrong)."""


def _varint(buf, pos: int, end: int) -> Tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise _Malformed()
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _fields(buf, pos: int, end: int) -> Iterator[Tuple[int, int, int, int]]:
    """(field number, wire type, value or start, length) of each field of the message in buf[pos:end]."""
    while pos < end:
        key, pos = _varint(buf, pos, end)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos, end)
            yield field, wire, value, 0
        elif wire == 2:
            length, pos = _varint(buf, pos, end)
            if pos + length > end:
                raise _Malformed()
            yield field, wire, pos, length
            pos += length
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
        else:
            raise _Malformed()


def _tensor(buf, start: int, length: int) -> Tuple[List[int], str, int]:
    """dims, tensor_type and the byte count of tensor_content of one TensorProto."""
    dims: List[int] = []
    kind, content = "", 0
    for field, wire, value, size in _fields(buf, start, start + length):
        if field == 1 and wire == 0:
            dims.append(value - (1 << 64) if value >= 1 << 63 else value)
        elif field == 1 and wire == 2:  # packed dims
            pos = value
            while pos < value + size:
                dim, pos = _varint(buf, pos, value + size)
                dims.append(dim - (1 << 64) if dim >= 1 << 63 else dim)
        elif field == 2 and wire == 2:
            kind = bytes(buf[value:value + size]).decode("utf-8", "replace")
        elif field == 3 and wire == 2:
            content = size
    return dims, kind, content


def check_declared_sizes(path: str) -> None:
    """Each parameter's dims against the bytes stored for it (consecutive records of one tag are one tensor,
    as MindSpore joins them); a mismatch is one CheckpointError line naming the file and the parameter."""
    with open(path, "rb") as handle:
        try:
            buf = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:  # an empty file
            return
    with buf:
        try:
            records = []
            for field, wire, start, length in _fields(buf, 0, len(buf)):
                if field != 1 or wire != 2:
                    continue
                tag, tensor = "", None
                for sub, sub_wire, value, size in _fields(buf, start, start + length):
                    if sub == 1 and sub_wire == 2:
                        tag = bytes(buf[value:value + size]).decode("utf-8", "replace")
                    elif sub == 2 and sub_wire == 2:
                        tensor = _tensor(buf, value, size)
                records.append((tag, tensor))
        except _Malformed:
            return
    stored = 0
    for n, (tag, tensor) in enumerate(records):
        if tensor is None:
            continue
        stored += tensor[2]
        if n + 1 < len(records) and records[n + 1][0] == tag:
            continue
        dims, kind, _ = tensor
        if kind in _ITEMSIZE:
            try:
                check_tensor_bytes([] if dims == [0] else dims, _ITEMSIZE[kind], stored, f"{path}: '{tag[:120]}'")
            except MsprobeError as exc:
                raise CheckpointError(str(exc)) from None
        stored = 0


class MindSporeCheckpointReader:
    def __init__(self, path: str):
        import mindspore as ms

        check_declared_sizes(path)
        try:
            self._params: Dict[str, object] = dict(ms.load_checkpoint(path))
        except (ValueError, RuntimeError, TypeError) as exc:
            raise CheckpointError(f"{path} cannot be loaded as a MindSpore checkpoint: "
                                  f"{' '.join(str(exc).split())[:300]}") from None

    def keys(self) -> List[str]:
        return list(self._params)

    def read(self, key: str) -> StoredTensor:
        import mindspore as ms

        value = self._params[key]
        if not isinstance(value, ms.Tensor):
            return StoredTensor(dtype=type(value).__name__, shape=(), value=value)
        dtype = str(value.dtype).lower()
        if value.dtype == ms.bfloat16:  # numpy has no bfloat16: widened exactly to float32
            raw = value.astype(ms.float32).asnumpy()
        else:
            raw = value.asnumpy()
        return StoredTensor(dtype=dtype, shape=tuple(value.shape), raw=raw)


def open_mindspore_checkpoint(path: str) -> Optional[MindSporeCheckpointReader]:
    """A reader when `path` is a MindSpore checkpoint (by its .ckpt name and not a zip archive), else None."""
    if path.endswith(".ckpt") and not zipfile.is_zipfile(path):
        return MindSporeCheckpointReader(path)
    return None
