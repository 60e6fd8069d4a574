"""`MsprobeTrainerCallback`: msprobe inside a `transformers.Trainer` run."""
from typing import Optional

from transformers import TrainerCallback

from msprobe.pytorch.integrations.driver import StepDriver

__all__ = ["MsprobeTrainerCallback"]


class MsprobeTrainerCallback(TrainerCallback):
    """Dumps each optimizer step the config selects and, with `monitor_config`, runs TrainerMon.

    ``Trainer(..., callbacks=[MsprobeTrainerCallback(config_path="config.json")])``
    """

    def __init__(self, config_path: Optional[str] = None, monitor_config: Optional[str] = None,
                 params_have_main_grad: bool = False):
        self.driver = StepDriver(config_path, monitor_config, params_have_main_grad)

    def on_train_begin(self, args, state, control, model=None, optimizer=None, **kwargs):
        self.driver.train_begin(model, optimizer, grad_acc_steps=max(1, int(args.gradient_accumulation_steps)))

    def on_step_begin(self, args, state, control, model=None, **kwargs):
        self.driver.step_begin(model)

    def on_step_end(self, args, state, control, **kwargs):
        self.driver.step_end()

    def on_train_end(self, args, state, control, **kwargs):
        self.driver.train_end()
