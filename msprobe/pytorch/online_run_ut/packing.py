"""PyTorch tensors to and from online run_ut blobs: a tensor's whole storage as raw bytes plus its layout.

The layout (shape, stride, storage offset) travels too, so the bench side rebuilds a tensor with the very
memory layout the device side had: offline run_ut loads dumped tensors with their strides, and a kernel may
round differently on a transposed input.
"""
import torch

from msprobe.pytorch.api_accuracy_checker.arguments import torch_dtype

__all__ = ["pack_tensor", "unpack_tensor"]


def pack_tensor(snapshot: torch.Tensor, name: str):
    """(blob meta, buffer) of a CPU snapshot (the adapter's copy_for_save); the buffer shares its memory."""
    if snapshot.device.type != "cpu":
        snapshot = snapshot.to("cpu")
    storage = snapshot.untyped_storage()
    raw = torch.empty(0, dtype=torch.uint8).set_(storage)
    buffer = memoryview(raw.numpy()) if raw.numel() else memoryview(b"")
    meta = {"name": name, "dtype": str(snapshot.dtype), "shape": list(snapshot.shape),
            "stride": list(snapshot.stride()), "offset": snapshot.storage_offset(), "nbytes": raw.numel()}
    return meta, buffer


def unpack_tensor(meta: dict, view: memoryview) -> torch.Tensor:
    """A new CPU tensor over the received bytes (writable: the payload is a bytearray), layout as sent;
    UnsupportedError for an unknown dtype, ValueError when the layout reaches past the bytes."""
    dtype = torch_dtype(meta["dtype"])
    item = torch.empty(0, dtype=dtype).element_size()
    shape, stride, offset = meta["shape"], meta["stride"], meta["offset"]
    if any(n < 0 for n in (offset, *shape, *stride)):
        raise ValueError(f"blob {meta['name']!r}: negative shape, stride or offset")
    if all(shape):
        extent = offset + sum((size - 1) * step for size, step in zip(shape, stride)) + 1
        if extent * item > len(view):
            raise ValueError(f"blob {meta['name']!r}: layout needs {extent * item} bytes, {len(view)} received")
    elements = 1
    for size in shape:
        elements *= size
    if elements * item > len(view):  # zero or overlapping strides would turn a few bytes into gigabytes
        raise ValueError(f"blob {meta['name']!r}: {elements} elements of {item} bytes from {len(view)} bytes received")
    raw = torch.frombuffer(view, dtype=torch.uint8) if len(view) else torch.empty(0, dtype=torch.uint8)
    return torch.empty(0, dtype=dtype).set_(raw.untyped_storage(), offset, shape, stride)


