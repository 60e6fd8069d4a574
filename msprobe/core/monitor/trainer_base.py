"""What the PyTorch and MindSpore TrainerMon share once hooks are installed: removal and reading results back.

An adapter keeps its MonitorEngine in `engine`, its HookSessions in the attributes named by
`HOOK_SESSIONS` (closed in that order, each set to None) and the `collecting_now` flag its hooks read.
"""
from msprobe.core.monitor.engine import MonitorEngine

__all__ = ["TrainerMonBase"]


class TrainerMonBase:
    HOOK_SESSIONS: tuple = ("session",)
    engine: MonitorEngine
    collecting_now: bool

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
