"""Read a plain tensor saved by `torch.save` as a numpy array without importing torch.

Both PyTorch file layouts are understood: the zip archive (`archive/data.pkl` + `archive/data/{key}`)
and the legacy stream (magic, protocol, sys_info, the object pickle, the storage-key pickle, then
each storage as an int64 element count followed by its raw little-endian bytes). Every pickle in the
file, the legacy header records included, is read by a restricted unpickler: the object pickle may
name only the tensor-rebuild function, the storage types and OrderedDict; the header records may name
nothing at all. A file that names anything else (a crafted `os.system`, say) is refused before any of
it runs. Anything unexpected raises `UnreadableTensorFile` with the reason; callers may then try
torch.load(weights_only=True), which is restricted too.
Legacy files are memory-mapped: a 100 MB tensor is a view of the page cache, not a copy.
"""
import collections
import mmap
import pickle
import zipfile

import numpy as np

__all__ = ["read_pt", "UnreadableTensorFile", "RefusedTensorLayout", "check_torch_layout"]

_STORAGE_DTYPES = {
    "FloatStorage": np.float32, "DoubleStorage": np.float64, "HalfStorage": np.float16,
    "BFloat16Storage": "bfloat16", "LongStorage": np.int64, "IntStorage": np.int32, "ShortStorage": np.int16,
    "CharStorage": np.int8, "ByteStorage": np.uint8, "BoolStorage": np.bool_,
}
_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C


class UnreadableTensorFile(Exception):
    """The file is not a plain tensor this reader understands."""


class RefusedTensorLayout(UnreadableTensorFile):
    """The file's layout is refused on purpose (negative or amplifying strides): no other reader may try it."""


def check_torch_layout(tensor):
    """The same refusal for a tensor torch.load built (the fallback reader): no more elements than its
    storage holds, no negative stride or offset."""
    numbers = (tensor.storage_offset(), *tensor.stride())
    stored = tensor.untyped_storage().nbytes() // max(1, tensor.element_size())
    if any(n < 0 for n in numbers):
        raise RefusedTensorLayout("negative stride or storage offset (refused)")
    if tensor.numel() > stored:
        raise RefusedTensorLayout(f"its layout repeats storage elements ({tensor.numel()} elements from {stored} "
                                  "stored, e.g. zero strides): refused")


class _TensorRecipe:
    def __init__(self, storage, offset, size, stride):
        self.storage, self.offset, self.size, self.stride = storage, offset, tuple(size), tuple(stride)


def _rebuild_tensor(storage, offset, size, stride, *unused):
    return _TensorRecipe(storage, offset, size, stride)


class _PlainUnpickler(pickle.Unpickler):
    """Plain data only (ints, strings, dicts, lists): the legacy header records and storage keys."""

    def find_class(self, module, name):
        raise UnreadableTensorFile(f"it refers to {module}.{name}, which a tensor file never does (refused, not run)")

    def persistent_load(self, pid):
        raise UnreadableTensorFile("unexpected persistent id in a header record")


def _plain_record(stream):
    return _PlainUnpickler(stream).load()


class _TensorUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if module == "torch._utils" and name == "_rebuild_tensor_v2":
            return _rebuild_tensor
        if module == "torch" and name in _STORAGE_DTYPES:
            return _STORAGE_DTYPES[name]
        if module == "collections" and name == "OrderedDict":
            return collections.OrderedDict
        raise UnreadableTensorFile(f"it refers to {module}.{name}, which a plain tensor file never does "
                                   "(refused, not run)")

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage"):
            raise UnreadableTensorFile("unexpected persistent id")
        if not any(pid[1] is dtype or pid[1] == dtype for dtype in _STORAGE_DTYPES.values()):
            raise UnreadableTensorFile("unknown storage type")
        return pid[1], str(pid[2]), int(pid[4])  # dtype, key, element count


def _recipe(stream):
    recipe = _TensorUnpickler(stream).load()
    if not isinstance(recipe, _TensorRecipe):
        raise UnreadableTensorFile("the file does not hold a single tensor")
    return recipe


def _check_layout(recipe, stored):
    """Refuse layouts that read outside the storage or multiply it: negative offsets or strides (they would
    read memory before the storage) and more elements than `stored` (zero strides: a few bytes would
    become gigabytes in every copy a reader makes). torch.save of an expanded tensor is the one honest
    source of such a file; msprobe's dumps save contiguous copies."""
    numbers = (recipe.offset, *recipe.size, *recipe.stride)
    if any(not isinstance(n, int) or isinstance(n, bool) for n in numbers) or len(recipe.size) != len(recipe.stride):
        raise RefusedTensorLayout("its shape, stride or offset is not a list of integers")
    if any(n < 0 for n in numbers):
        raise RefusedTensorLayout("negative shape, stride or storage offset (refused)")
    elements = 1
    for size in recipe.size:
        elements *= size
    if elements > stored:
        raise RefusedTensorLayout(f"its layout repeats storage elements ({elements} elements from {stored} "
                                  "stored, e.g. zero strides): refused")


def _view(recipe, storage_bytes_to_array):
    dtype, key, numel = recipe.storage
    flat = storage_bytes_to_array(key, np.uint16 if dtype == "bfloat16" else dtype, numel)
    if dtype == "bfloat16":  # bf16 is the top half of a float32
        flat = (flat.astype(np.uint32) << 16).view(np.float32)
    itemsize = flat.dtype.itemsize
    _check_layout(recipe, flat.size)
    needed = recipe.offset + 1 + sum((n - 1) * s for n, s in zip(recipe.size, recipe.stride)) \
        if all(recipe.size) else recipe.offset
    if needed > flat.size:
        raise UnreadableTensorFile("storage is smaller than the tensor")
    return np.lib.stride_tricks.as_strided(flat[recipe.offset:], shape=recipe.size,
                                           strides=[s * itemsize for s in recipe.stride], writeable=False)


def _read_zip(path):
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        pickles = [n for n in names if n.endswith("/data.pkl")]
        if len(pickles) != 1:
            raise UnreadableTensorFile("no data.pkl in the archive")
        root = pickles[0][: -len("data.pkl")]
        with archive.open(pickles[0]) as stream:
            recipe = _recipe(stream)

        def storage(key, dtype, numel):
            data = np.frombuffer(archive.read(f"{root}data/{key}"), dtype=dtype)
            return data[:numel]

        return np.array(_view(recipe, storage))  # the archive closes: own the memory


def _read_legacy(path):
    with open(path, "rb") as handle:
        if _plain_record(handle) != _LEGACY_MAGIC:
            raise UnreadableTensorFile("not a torch file")
        _plain_record(handle)  # protocol version
        info = _plain_record(handle)
        if not isinstance(info, dict) or not info.get("little_endian", True):
            raise UnreadableTensorFile("big-endian file")
        recipe = _recipe(handle)
        keys = _plain_record(handle)
        if not isinstance(keys, list):
            raise UnreadableTensorFile("bad storage key list")
        position = handle.tell()
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    offsets = {}
    for key in keys:  # storages follow in key order: int64 count, then the bytes
        count = int(np.frombuffer(mapped, dtype="<i8", count=1, offset=position)[0])
        if count < 0:
            raise UnreadableTensorFile("negative storage size")
        offsets[str(key)] = (position + 8, count)
        dtype = recipe.storage[0]
        itemsize = 2 if dtype == "bfloat16" else np.dtype(dtype).itemsize
        position += 8 + count * itemsize

    def storage(key, dtype, numel):
        start, count = offsets[key]
        return np.frombuffer(mapped, dtype=dtype, count=count, offset=start)

    return _view(recipe, storage)


def read_pt(path):
    """The tensor in `path` as a numpy array (bf16 widened to float32); raises UnreadableTensorFile."""
    try:
        if zipfile.is_zipfile(path):
            return _read_zip(path)
        return _read_legacy(path)
    except UnreadableTensorFile:
        raise
    except EOFError:
        raise UnreadableTensorFile("the file is truncated") from None
    except (pickle.UnpicklingError, ValueError, KeyError, TypeError, IndexError, OSError, AttributeError,
            zipfile.BadZipFile, RecursionError, MemoryError) as exc:
        raise UnreadableTensorFile(str(exc) or type(exc).__name__) from None
