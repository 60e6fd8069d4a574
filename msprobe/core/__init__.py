"""Framework-neutral core of msprobe (never imports torch or mindspore at import time)."""
