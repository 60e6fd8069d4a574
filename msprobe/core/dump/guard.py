"""Dump failures never reach the user's code: the call runs undumped and the failure is logged once.

A bug or an unexpected value in our bookkeeping (statistics of an exotic tensor, a descriptor we
cannot build) must not stop a training run that would have worked without msprobe. Hooks catch
exceptions around their bookkeeping and hand them to the collector's `DumpGuard`:

    try:
        call = collector.begin_forward(key, args, kwargs)
    except Exception as exc:
        collector.guard.report(key, exc)
        return func(*args, **kwargs)
"""
from msprobe.core.log import logger

__all__ = ["DumpGuard"]


class DumpGuard:
    """Logs each failing API or module once (a warning with the reason) and counts the failures."""

    def __init__(self):
        self.failed = {}  # key -> number of failures

    def report(self, key, exc):
        if getattr(exc, "reaches_user", False):  # raised on purpose for the user (NaNProducerError)
            raise exc
        count = self.failed.get(key, 0)
        self.failed[key] = count + 1
        if not count:
            logger.warning(f"msprobe: cannot dump {key} ({type(exc).__name__}: {exc}); the call runs undumped.")

    def call(self, key, fn, *args):
        """fn(*args), or None when it raised (reported)."""
        try:
            return fn(*args)
        except Exception as exc:  # noqa: BLE001 - reported; the user's call goes on
            self.report(key, exc)
            return None
