"""Framework-free checkpoint readers: safetensors files (memory-mapped), sharded folders with an index file, and
folders of one weight file (`save_pretrained`, peft adapters).

A reader lists its keys and hands out one tensor at a time as a `StoredTensor` (the raw numpy array, possibly a
memory map, and the dtype name as the framework spells it), so a comparison never holds more than one pair.
Framework formats (`torch.save` files, MindSpore `.ckpt`) come from openers the framework adapters pass in.
"""
import os
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional, Protocol, Tuple

import numpy as np

from msprobe.core.bounded_walk import Budget, loads_json, tensor_bytes
from msprobe.core.errors import MsprobeError
from msprobe.core.log import logger
from msprobe.core.paths import check_path, load_json

__all__ = ["StoredTensor", "CheckpointReader", "Opener", "open_checkpoint", "SafetensorsReader", "ShardedReader",
           "float_chunks", "MAX_HEADER_BYTES", "locate_checkpoint", "WEIGHT_FILES"]

# a safetensors header larger than this is refused before it is read (real ones are a few MB at most)
MAX_HEADER_BYTES = 100 * 1024 * 1024
_CHUNK = 1 << 22
# a header's values: a few per tensor; nesting: the header is flat (entries of dtype/shape/offsets)
_HEADER_BUDGET = Budget(nodes=4_000_000, depth=8)
_SAFETENSORS_DTYPES = {"F64": ("float64", np.float64), "F32": ("float32", np.float32), "F16": ("float16", np.float16),
                       "BF16": ("bfloat16", np.uint16), "I64": ("int64", np.int64), "I32": ("int32", np.int32),
                       "I16": ("int16", np.int16), "I8": ("int8", np.int8), "U8": ("uint8", np.uint8),
                       "BOOL": ("bool", np.bool_)}


class CheckpointError(MsprobeError):
    """A checkpoint that cannot be read as one."""


@dataclass
class StoredTensor:
    """One stored tensor. `raw` holds its elements: bfloat16 as uint16 bit patterns, or already widened to
    float32 by a reader that had to copy anyway. `dtype` is the stored dtype name, `shape` the logical shape.
    `value` is set instead for an entry that is not a tensor (a step count)."""
    dtype: str
    shape: Tuple[int, ...]
    raw: Optional[np.ndarray] = None
    value: Any = None


class CheckpointReader(Protocol):
    """What the comparison needs of a checkpoint."""

    def keys(self) -> List[str]: ...

    def read(self, key: str) -> StoredTensor: ...


Opener = Callable[[str], Optional[CheckpointReader]]


def float_chunks(stored: StoredTensor, chunk: int = _CHUNK) -> Iterator[np.ndarray]:
    """The tensor's elements as float64, in chunks of at most `chunk` elements (bfloat16 widened exactly)."""
    if stored.raw is None:
        return
    flat = stored.raw.reshape(-1)
    for start in range(0, flat.size, chunk):
        part = flat[start:start + chunk]
        if stored.dtype == "bfloat16" and part.dtype == np.uint16:
            part = (part.astype(np.uint32) << 16).view(np.float32)
        yield part.astype(np.float64)


class SafetensorsReader:
    """A `.safetensors` file: an 8-byte header length, a JSON header, then the raw bytes (memory-mapped here)."""

    def __init__(self, path: str):
        self.path = path
        size = os.path.getsize(path)
        with open(path, "rb") as handle:
            prefix = handle.read(8)
            if len(prefix) != 8:
                raise CheckpointError(f"{path} is not a safetensors file (shorter than its header length).")
            header_len = int.from_bytes(prefix, "little")
            if header_len > min(MAX_HEADER_BYTES, size - 8):
                raise CheckpointError(f"{path} is not a safetensors file (declared header of {header_len} bytes).")
            header = loads_json(handle.read(header_len), f"{path} (safetensors header)", _HEADER_BUDGET)
        if not isinstance(header, dict):
            raise CheckpointError(f"{path} is not a safetensors file (header is not an object).")
        header.pop("__metadata__", None)
        self._data_start, self._data_len = 8 + header_len, size - 8 - header_len
        self._entries = {}
        refused = []
        for key, entry in header.items():
            checked = self._checked_entry(entry)
            if isinstance(checked, str):
                refused.append(f"entry '{key[:120]}' {checked}")
            else:
                self._entries[key] = checked
        if refused and not self._entries:
            raise CheckpointError(f"{path}: no entry can be read ({refused[0]}"
                                  f"{f' and {len(refused) - 1} more' if len(refused) > 1 else ''}).")
        for reason in refused:
            logger.warning("%s: %s: skipped.", path, reason)
        self._map: Optional[np.ndarray] = None

    def _checked_entry(self, entry):
        """(dtype name, numpy type, shape, begin, count), or why the entry cannot be read: offsets and
        dimensions must be integers, and the bytes the shape needs (exact arithmetic, no int64 wrap) must be
        the bytes between the offsets, inside the file."""
        try:
            dtype, shape, offsets = entry["dtype"], tuple(entry["shape"]), entry["data_offsets"]
            name, np_type = _SAFETENSORS_DTYPES[dtype]
            begin, end = offsets
            itemsize = np.dtype(np_type).itemsize
            needed = tensor_bytes(shape, itemsize)
        except (KeyError, TypeError, ValueError):
            return "has an unsupported or malformed dtype, shape or data_offsets"
        if not all(isinstance(n, int) and not isinstance(n, bool) for n in (begin, end)):
            return "has data_offsets that are not integers"
        if not 0 <= begin <= end <= self._data_len or end - begin != needed:
            return f"points outside the file or does not match its shape ({needed:,} bytes needed)"
        return name, np_type, shape, begin, needed // itemsize

    def keys(self) -> List[str]:
        return list(self._entries)

    def read(self, key: str) -> StoredTensor:
        name, np_type, shape, begin, count = self._entries[key]
        if self._map is None:
            self._map = np.memmap(self.path, dtype=np.uint8, mode="r")
        start = self._data_start + begin
        raw = self._map[start:start + count * np.dtype(np_type).itemsize].view(np_type)
        return StoredTensor(dtype=name, shape=shape, raw=raw)


class ShardedReader:
    """A folder of shards named by an index file (`*.index.json` with a `weight_map` of key -> shard file)."""

    def __init__(self, folder: str, index_path: str, open_file: Callable[[str], CheckpointReader]):
        index = load_json(index_path, "checkpoint index")
        weight_map = index.get("weight_map") if isinstance(index, dict) else None
        if not isinstance(weight_map, dict):
            raise CheckpointError(f"{index_path}: 'weight_map' is not an object.")
        self._weight_map: Dict[str, str] = {}
        for key, shard in weight_map.items():
            if not isinstance(shard, str) or os.path.basename(shard) != shard:
                raise CheckpointError(f"{index_path}: shard of '{key[:120]}' is not a plain file name.")
            self._weight_map[key] = shard
        self._folder, self._open_file = folder, open_file
        self._open: Tuple[Optional[str], Optional[CheckpointReader]] = (None, None)

    def keys(self) -> List[str]:
        return list(self._weight_map)

    def read(self, key: str) -> StoredTensor:
        shard = self._weight_map[key]
        name, reader = self._open
        if name != shard or reader is None:  # one shard open at a time: keys are compared in index order
            reader = self._open_file(os.path.join(self._folder, shard))
            self._open = (shard, reader)
        try:
            return reader.read(key)
        except KeyError:  # the index names a key its shard does not hold: reported, the rest compared
            logger.warning("%s: '%s' is not in its shard %s: skipped.", self._folder, key[:120], shard)
            return StoredTensor(dtype="(missing)", shape=(), value=f"(not in shard {shard})")


# the weight files transformers (`save_pretrained`) and peft (adapters) write without an index, safetensors first
WEIGHT_FILES = ("model.safetensors", "adapter_model.safetensors", "pytorch_model.bin", "adapter_model.bin")
_CHECKPOINT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt")


def locate_checkpoint(folder: str) -> Tuple[str, str]:
    """What to read in a folder: its index file (`*.index.json`, sharded) or its one weight file, and a note (empty
    when the choice was the only one): safetensors is preferred where a folder holds both kinds."""
    names = sorted(os.listdir(folder))
    indexes = [name for name in names if name.endswith(".index.json")]
    if indexes:
        chosen = ([name for name in indexes if "safetensors" in name] or indexes)[0]
        return os.path.join(folder, chosen), _choice_note(folder, chosen, indexes)
    known = [name for name in WEIGHT_FILES if name in names]
    if known:
        return os.path.join(folder, known[0]), _choice_note(folder, known[0], known)
    files = [name for name in names if name.endswith(_CHECKPOINT_SUFFIXES)
             and os.path.isfile(os.path.join(folder, name))]
    if len(files) == 1:
        return os.path.join(folder, files[0]), ""
    found = f"it holds {len(files)} weight files ({', '.join(files[:5])}); name one" if files else "nothing to read"
    raise CheckpointError(f"{folder} is a folder without an index file (*.index.json) or a weight file "
                          f"({', '.join(WEIGHT_FILES)}): {found}.")


def _choice_note(folder, chosen, candidates):
    others = [name for name in candidates if name != chosen]
    return f"{folder} holds {chosen} and {', '.join(others)}: comparing {chosen}" if others else ""


def open_checkpoint(path: str, openers: Tuple[Opener, ...] = ()) -> CheckpointReader:
    """A reader for the file or folder at `path` (sharded with an index, or a `save_pretrained` / adapter folder of
    one weight file). `openers` (from the framework adapter) are tried first for files; each returns a reader or
    None when the file is not its format."""
    path = check_path(path, kind="any", what="checkpoint")

    def open_file(file_path):
        check_path(file_path, kind="file", what="checkpoint shard")
        if file_path.endswith(".safetensors"):
            return SafetensorsReader(file_path)
        for opener in openers:
            reader = opener(file_path)
            if reader is not None:
                return reader
        raise CheckpointError(f"{file_path}: not a checkpoint format this framework reads (safetensors, "
                              "and the framework's own).")

    if not os.path.isdir(path):
        return open_file(path)
    chosen, note = locate_checkpoint(path)
    if note:
        logger.warning(note)
    if chosen.endswith(".index.json"):
        return ShardedReader(path, chosen, open_file)
    return open_file(chosen)
