"""Helpers for MindSpore training scripts: the `MsprobeStep` callback and `seed_all`."""
import os
import random

from mindspore.train import Callback

__all__ = ["MsprobeStep", "seed_all"]


class MsprobeStep(Callback):
    """mindspore.train.Model callback: start() at each step begin, stop() and step() at its end.

    For L0/mix (Cells) and L1 primitives call `debugger.start(model)` once before `Model.train`.
    """

    def __init__(self, debugger):
        super().__init__()
        self.debugger = debugger

    def on_train_step_begin(self, run_context):
        self.debugger.start()

    def on_train_step_end(self, run_context):
        self.debugger.stop()
        self.debugger.step()


def seed_all(seed=1234, mode=False, rm_dropout=True):
    """Fix every random source (Python, numpy, MindSpore) and optionally enable deterministic kernels.

    rm_dropout: make dropout the identity (must run before Dropout cells are created).
    """
    import numpy as np
    import mindspore as ms
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 2 ** 32:
        from msprobe.core.errors import ConfigError
        raise ConfigError(f"seed_all: seed must be an integer in [0, 2**32), got {seed!r}.")
    random.seed(seed)
    os.environ["PYTHONHASHSEED"] = str(seed)
    np.random.seed(seed)
    ms.set_seed(seed)
    if mode:
        ms.set_context(deterministic="ON")
    if rm_dropout:
        _disable_dropout()


def _disable_dropout():
    from mindspore import mint, nn, ops

    def identity_dropout(x, *args, **kwargs):
        return x
    for owner, name in ((ops, "dropout"), (mint.nn.functional, "dropout"), (ops, "dropout2d"),
                        (ops, "dropout3d")):
        if hasattr(owner, name):
            setattr(owner, name, identity_dropout)
    for cls in (nn.Dropout, getattr(mint.nn, "Dropout", None)):
        if cls is not None:
            cls.construct = lambda self, x: x
