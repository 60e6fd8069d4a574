"""Callbacks that drive msprobe from the training frameworks users already use.

`MsprobeTrainerCallback` (a `transformers.TrainerCallback`) and `MsprobeLightningCallback` (a Lightning `Callback`)
are built on first use, so importing this package imports neither transformers nor Lightning.
"""
from typing import Any

__all__ = ["MsprobeTrainerCallback", "MsprobeLightningCallback"]


def __getattr__(name: str) -> Any:
    if name == "MsprobeTrainerCallback":
        from msprobe.pytorch.integrations.hf_trainer import MsprobeTrainerCallback

        return MsprobeTrainerCallback
    if name == "MsprobeLightningCallback":
        from msprobe.pytorch.integrations.lightning import MsprobeLightningCallback

        return MsprobeLightningCallback
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
