"""`dump_enable` (a key msprobe 26.x users bring): switch dumping on and off by editing config.json while training runs.

When config.json sets `dump_enable`, the debugger keeps a `DumpSwitch` on that file and asks it at each `start()`
and `step()`. The switch compares the file's modification time and size with what it saw last (one `stat`); only
when they changed does it read the file again. The new `dump_enable` takes effect at that point: `false` closes an
open window (its files are written) and no window opens until the file says `true` again. A file that cannot be
read or holds no valid JSON turns dumping off (one warning line): a half-written edit must not dump every step of a
long run. A file whose `dump_enable` was removed keeps the last state. No other key is re-read.
"""
import os
from typing import Optional, Tuple

from msprobe.core.errors import MsprobeError
from msprobe.core.log import logger
from msprobe.core.paths import load_json

__all__ = ["DumpSwitch"]


def _signature(path: str) -> Optional[Tuple[int, int]]:
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_mtime_ns, status.st_size


class DumpSwitch:
    """The on/off state of `dump_enable` in the config file at `path`, as of the last `enabled()`."""

    def __init__(self, path: str, enabled: bool) -> None:
        self.path = path
        self.state = enabled
        self._signature = _signature(path)

    def enabled(self) -> bool:
        """Whether dumping is on now (the file is read again only when it changed since the last look)."""
        signature = _signature(self.path)
        if signature != self._signature:
            self._signature = signature
            state = self._read()
            if state != self.state:
                logger.info(f"msprobe: dump_enable is now {str(state).lower()} ({self.path}).")
            self.state = state
        return self.state

    def _read(self) -> bool:
        try:
            raw = load_json(self.path, what="config file")
        except MsprobeError as error:
            logger.warning(f"msprobe: dumping is off until the config file reads again: {error}")
            return False
        value = raw.get("dump_enable") if isinstance(raw, dict) else None
        if value is None:
            return self.state
        if not isinstance(value, bool):
            logger.warning(f"msprobe: dump_enable must be true or false, got {value!r}; dumping is off.")
            return False
        return value
