"""The msprobe logger: `[INFO] 2026-01-01 12:00:00 (pid) message`, level from MSPROBE_LOG_LEVEL.

MSPROBE_LOG_LEVEL: 0 debug, 1 info (default), 2 warning, 3 error, 4 silent.
"""
import logging
import os
import sys

__all__ = ["logger", "set_level", "level_from_env"]

_LEVELS = {0: logging.DEBUG, 1: logging.INFO, 2: logging.WARNING, 3: logging.ERROR, 4: logging.CRITICAL + 10}


class _Formatter(logging.Formatter):
    def format(self, record):
        name = "WARNING" if record.levelno == logging.WARNING else record.levelname
        stamp = self.formatTime(record, "%Y-%m-%d %H:%M:%S")
        line = f"[{name}] {stamp} ({record.process}) {record.getMessage()}"
        if record.exc_info:  # logger.exception at MSPROBE_LOG_LEVEL=0: the traceback follows the line
            line += "\n" + self.formatException(record.exc_info)
        # names from data may hold lone surrogates (JSON "\ud800"): shown escaped, never an encoding error
        return line.encode("utf-8", "backslashreplace").decode("utf-8")


class _StdoutHandler(logging.StreamHandler):
    """Writes to whatever sys.stdout is at emit time (pytest capture, redirect_stdout, notebooks)."""

    def __init__(self):
        super().__init__(sys.stdout)
        self._explicit = None

    @property
    def stream(self):
        return self._explicit or sys.stdout

    @stream.setter
    def stream(self, value):  # an explicit stream (setStream) wins over sys.stdout
        self._explicit = value


def level_from_env():
    """The numeric MSPROBE_LOG_LEVEL (0-4); an invalid value falls back to 1 (info)."""
    raw = os.environ.get("MSPROBE_LOG_LEVEL", "1").strip()
    return int(raw) if raw in {"0", "1", "2", "3", "4"} else 1


def set_level(level):
    """Set the msprobe log level with the MSPROBE_LOG_LEVEL scale (0-4)."""
    logger.setLevel(_LEVELS.get(int(level), logging.INFO))


def _build_logger():
    log = logging.getLogger("msprobe")
    if not log.handlers:
        handler = _StdoutHandler()
        handler.setFormatter(_Formatter())
        log.addHandler(handler)
    log.propagate = False
    log.setLevel(_LEVELS[level_from_env()])
    return log


logger = _build_logger()
