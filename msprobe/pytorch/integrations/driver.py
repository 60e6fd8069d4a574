"""What both callbacks do, whatever calls them: a PrecisionDebugger window around each optimizer step, and a
TrainerMon attached once the optimizer exists; everything removed when training ends."""
from typing import Any, Optional

from msprobe.core.log import logger

__all__ = ["StepDriver"]


class StepDriver:
    """`config_path`: the PrecisionDebugger config (None: no dump). `monitor_config`: a TrainerMon config (None: no
    monitor). The debugger decides steps and ranks from its config, as with start/stop by hand."""

    def __init__(self, config_path: Optional[str] = None, monitor_config: Optional[str] = None,
                 params_have_main_grad: bool = False):
        from msprobe.pytorch import PrecisionDebugger

        self.debugger = PrecisionDebugger(config_path=config_path) if config_path else None
        self.monitor_config, self.params_have_main_grad = monitor_config, params_have_main_grad
        self.monitor: Any = None
        self._open = False

    def train_begin(self, model: Any, optimizer: Any, grad_acc_steps: int = 1) -> None:
        if self.monitor_config and self.monitor is None:
            import torch

            from msprobe.pytorch.monitor import TrainerMon

            # trainers wrap the optimizer (accelerate's AcceleratedOptimizer): the monitor hooks the real one
            for _ in range(4):
                if not isinstance(getattr(optimizer, "optimizer", None), torch.optim.Optimizer):
                    break
                optimizer = optimizer.optimizer
            self.monitor = TrainerMon(self.monitor_config, params_have_main_grad=self.params_have_main_grad)
            self.monitor.set_monitor(model, grad_acc_steps=grad_acc_steps, optimizer=optimizer)

    def step_begin(self, model: Any) -> None:
        if self.debugger is not None and not self._open:
            self.debugger.start(model)
            self._open = True

    def step_end(self) -> None:
        if self.debugger is not None and self._open:
            self.debugger.stop()
            self.debugger.step()
            self._open = False

    def train_end(self) -> None:
        if self._open:  # training stopped inside a step (an exception, a limit): close the window
            self.step_end()
        if self.debugger is not None:
            self.debugger.close()
        if self.monitor is not None:
            self.monitor.remove()
            self.monitor = None
        logger.info("msprobe callback: training ended, hooks removed")
