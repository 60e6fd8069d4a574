"""seed_all: fix every random source (and optionally force deterministic kernels) for comparable dumps."""
import os
import random

import numpy as np
import torch

__all__ = ["seed_all", "enable_deterministic", "restore_dropout"]

_DROPOUT_APIS = ("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout")
_original_dropouts = {}


def seed_all(seed=1234, mode=False, rm_dropout=True):
    """Seed python, numpy and torch (CPU/CUDA/NPU); mode=True enables deterministic algorithms;
    rm_dropout=True makes the functional dropouts (and so nn.Dropout*) use p=0."""
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 2 ** 32:
        from msprobe.core.errors import ConfigError
        raise ConfigError(f"seed_all: seed must be an integer in [0, 2**32), got {seed!r}.")
    os.environ["PYTHONHASHSEED"] = str(seed)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
    if mode:  # like the reference, mode=False leaves the user's own determinism settings alone
        enable_deterministic()
    torch.backends.cudnn.benchmark = False
    try:
        import torch_npu  # noqa: F401
        torch.npu.manual_seed_all(seed)
    except (ImportError, AttributeError):
        pass
    if rm_dropout:
        _remove_dropout()


def enable_deterministic():
    """Deterministic kernels only (what seed_all(mode=True) and config "is_deterministic" turn on):
    an op without a deterministic implementation raises instead of running."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    os.environ.setdefault("HCCL_DETERMINISTIC", "true")  # Ascend collectives, read by torch_npu
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False


def _remove_dropout():
    import torch.nn.functional as F

    for name in _DROPOUT_APIS:
        original = getattr(F, name, None)
        if original is None or name in _original_dropouts:
            continue
        _original_dropouts[name] = original

        def no_dropout(input, p=0.5, *args, _original=original, **kwargs):
            if "p" in kwargs:
                kwargs["p"] = 0.0
            return _original(input, 0.0, *args, **kwargs)

        no_dropout.__name__ = original.__name__
        no_dropout.__doc__ = original.__doc__
        no_dropout._msprobe_original = original  # the L1 dump's API table names the original (api_names._add)
        setattr(F, name, no_dropout)


def restore_dropout():
    """Undo rm_dropout: put the original functional dropouts back."""
    import torch.nn.functional as F

    for name, original in _original_dropouts.items():
        setattr(F, name, original)
    _original_dropouts.clear()
