"""`MsprobeLightningCallback`: msprobe inside a Lightning `Trainer.fit` run."""
from typing import Optional

try:
    from lightning.pytorch import Callback
except ImportError:  # the standalone package name
    from pytorch_lightning import Callback

from msprobe.pytorch.integrations.driver import StepDriver

__all__ = ["MsprobeLightningCallback"]


class MsprobeLightningCallback(Callback):
    """Dumps each training batch the config selects and, with `monitor_config`, runs TrainerMon.

    ``lightning.Trainer(..., callbacks=[MsprobeLightningCallback(config_path="config.json")])``
    """

    def __init__(self, config_path: Optional[str] = None, monitor_config: Optional[str] = None,
                 params_have_main_grad: bool = False):
        self.driver = StepDriver(config_path, monitor_config, params_have_main_grad)

    def on_train_start(self, trainer, pl_module):
        optimizers = trainer.optimizers
        self.driver.train_begin(pl_module, optimizers[0] if optimizers else None,
                                grad_acc_steps=max(1, int(trainer.accumulate_grad_batches)))

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self.driver.step_begin(pl_module)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.driver.step_end()

    def on_train_end(self, trainer, pl_module):
        self.driver.train_end()

    def on_exception(self, trainer, pl_module, exception):
        self.driver.train_end()
