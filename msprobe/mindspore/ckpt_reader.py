"""MindSpore `.ckpt` checkpoints for ckpt_compare (a protobuf file: MindSpore reads it whole; no code runs)."""
import zipfile
from typing import Dict, List, Optional

from msprobe.core.ckpt_compare.readers import CheckpointError, StoredTensor

__all__ = ["open_mindspore_checkpoint"]


class MindSporeCheckpointReader:
    def __init__(self, path: str):
        import mindspore as ms

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
