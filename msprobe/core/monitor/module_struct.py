"""`print_struct`: the model's module structure written to `$MONITOR_OUTPUT_DIR/module_struct.json`, then a stop.

Layout (1.2.1's): `{"{vpp}:{module}": {"input": {...}, "output": {...}}}` where each side is
`{"config": "tensor", "tensor": "size=(4, 8), dtype=..."}` or `{"config": "tuple[n]", "0": "size=...", ...}`
(a non-tensor element is its type). The dtype is the framework's own spelling (torch.float32, Float32).
"""
import json
import os
from typing import Callable

from msprobe.core.errors import MsprobeError
from msprobe.core.monitor.engine import output_root
from msprobe.core.monitor.files import write_bytes

__all__ = ["describe_io", "write_struct_and_stop"]


def _tensor_text(value) -> str:
    return f"size={tuple(value.shape)}, dtype={value.dtype}"


def describe_io(value, is_tensor: Callable[[object], bool]) -> dict:
    """The struct entry of one module input or output."""
    if is_tensor(value):
        return {"config": "tensor", "tensor": _tensor_text(value)}
    if isinstance(value, (tuple, list)):
        out = {"config": f"tuple[{len(value)}]"}
        for i, item in enumerate(value):
            out[str(i)] = _tensor_text(item) if is_tensor(item) else str(type(item))
        return out
    return {"config": str(type(value))}


def write_struct_and_stop(struct: dict, cleanup: Callable[[], None]) -> None:
    """Write module_struct.json, run `cleanup` (remove the hooks), and stop training with a message."""
    path = os.path.join(output_root(), "module_struct.json")
    write_bytes(path, json.dumps(struct, indent=1).encode("utf-8"))
    cleanup()
    raise MsprobeError(f"monitor: print_struct is set; the model structure is in {path}. "
                       "Set print_struct to false to train with the monitor.")
