"""Write failures (a full disk) that must never reach training: logged once per kind and step, then counted.

The dump writer, the monitor and grad_probe share it. `record()` logs the first failure of a kind (and
reason) in a step and counts the rest; `report()` logs one line naming what was not written since the last
report. Failures of work still in progress stay out of reports until `settle()`.
"""
import os
import re
import threading
from typing import Any, Dict, Set, Tuple

from msprobe.core.log import logger

__all__ = ["WriteFailures"]

_ERRNO_IN_TEXT = re.compile(r"\[Errno (\d+)\]")


class WriteFailures:
    """Files that could not be written, by step and kind: the first of each kind in a step is logged.

    Failures of a batch still being written are held back (`_pending`) until `settle()` (the batch is done):
    a report then names each step's failures whole, in one line, however the writer thread and the training
    thread's stop() interleave."""

    def __init__(self, component: str):
        self.component = component
        self._lock = threading.Lock()
        self._logged: Set[Tuple[Any, ...]] = set()
        self._pending: Dict[str, Dict[int, int]] = {}  # what -> {step: count}, of the batch being written
        self._unreported: Dict[str, Dict[int, int]] = {}  # what -> {step: count}, of finished batches
        self.totals: Dict[str, int] = {}  # what -> count (whole run)

    def settle(self):
        """The batch being written is done: its failures may be reported."""
        with self._lock:
            for what, steps in self._pending.items():
                target = self._unreported.setdefault(what, {})
                for step, count in steps.items():
                    target[step] = target.get(step, 0) + count
            self._pending = {}

    def record(self, step, what, exc, path):
        reason = _reason(exc)
        with self._lock:
            self.totals[what] = self.totals.get(what, 0) + 1
            steps = self._pending.setdefault(what, {})
            steps[step] = steps.get(step, 0) + 1
            first = (step, what, reason) not in self._logged
            self._logged.add((step, what, reason))
        if first:
            logger.error(f"{self.component}: cannot write {what} of step {step} ({reason}: {path}); training "
                         "goes on, further such failures of this step are counted.")

    def report(self):
        """Log one line naming what failed since the last report (None when nothing did)."""
        with self._lock:
            unreported, self._unreported = self._unreported, {}
        if not unreported:
            return None
        parts = []
        for what, steps in unreported.items():
            numbers = sorted(steps)
            shown = ", ".join(str(step) for step in numbers[:8]) + (", ..." if len(numbers) > 8 else "")
            parts.append(f"{sum(steps.values())} {what} (step {shown})")
        line = f"{self.component}: not written: " + "; ".join(parts) + "."
        logger.error(line)
        return line


def _reason(exc):
    number = getattr(exc, "errno", None)
    if not number:  # the JSON helper sends the error as text
        found = _ERRNO_IN_TEXT.search(str(exc))
        number = int(found.group(1)) if found else None
    return os.strerror(number) if number else type(exc).__name__
