"""What the PyTorch and MindSpore TrainerMon share: starting collection, removal and reading results back.

An adapter keeps its MonitorConfig in `config`, its MonitorEngine in `engine`, its HookSessions in the
attributes named by `HOOK_SESSIONS` (closed in that order, each set to None) and the `collecting_now`
flag its hooks read.
"""
from msprobe.core.log import logger
from msprobe.core.monitor.engine import MonitorEngine
from msprobe.core.monitor.monitor_config import MonitorConfig

__all__ = ["TrainerMonBase"]


class TrainerMonBase:
    HOOK_SESSIONS: tuple = ("session",)
    config: MonitorConfig
    engine: MonitorEngine
    collecting_now: bool

    def _start_collecting(self, parameters: int, hooked: str) -> None:
        """The end of set_monitor: collect from this step on if the schedule says so, and say what is watched."""
        self.collecting_now = self.engine.collecting()
        output = self.engine.run_dir if self.config.format != "api" else "(api)"
        logger.info(f"monitor: {parameters} parameters, {hooked} hooked; output {output}")

    def generate_xy_metrics(self) -> tuple:
        """({tag: {op: value}} of activations, same of activation gradients) of the last collected step."""
        return dict(self.engine.latest.get("actv", {})), dict(self.engine.latest.get("actv_grad", {}))

    def remove(self) -> None:
        """Remove every hook and restore patched functions; close the files and draw the plots."""
        for name in self.HOOK_SESSIONS:
            session = getattr(self, name, None)
            if session is not None:
                session.close()
                setattr(self, name, None)
        self.collecting_now = False
        self.engine.close()

    @property
    def run_dir(self) -> str:
        return self.engine.run_dir
