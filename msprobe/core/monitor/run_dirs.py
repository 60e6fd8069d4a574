"""Monitor run directories `{stamp}-rank{r}-{id}`: naming them, reading their time stamps, and finding the one
a resumed run continues (`append_output`).

A stamp is `Dec03_21-34-40` (month abbreviation in English, day, hour-minute-second; no year, as in 1.2.1).
Stamps compare as (month, day, hour, minute, second), never as strings ("Apr" < "Dec" alphabetically).
"""
import os
import re
import time
import uuid
from typing import Optional

__all__ = ["MONTHS", "RUN_DIR_PATTERN", "format_stamp", "parse_stamp", "run_dir_name", "find_resume_dir"]

MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_DAYS_IN_MONTH = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)  # no year in a stamp: Feb 29 allowed
_STAMP = re.compile(r"^([A-Za-z]{3})(\d{2})_(\d{2})-(\d{2})-(\d{2})$")
_RUN_DIR = re.compile(r"^([A-Za-z]{3}\d{2}_\d{2}-\d{2}-\d{2})-rank(\d+)(?:-.*)?$")
RUN_DIR_PATTERN = _RUN_DIR  # `{stamp}-rank{r}-...`: group 1 the stamp, group 2 the rank


def format_stamp(moment: Optional[time.struct_time] = None) -> str:
    """`Dec03_21-34-40` for `moment` (default now, local time); English month names whatever the locale."""
    t = moment or time.localtime()
    return f"{MONTHS[t.tm_mon - 1]}{t.tm_mday:02d}_{t.tm_hour:02d}-{t.tm_min:02d}-{t.tm_sec:02d}"


def parse_stamp(text) -> Optional[tuple]:
    """(month, day, hour, minute, second) of a stamp, or None when `text` is not one."""
    match = _STAMP.match(text) if isinstance(text, str) else None
    if not match:
        return None
    month_name, day, hour, minute, second = match.groups()
    month = next((i + 1 for i, name in enumerate(MONTHS) if name.lower() == month_name.lower()), None)
    day, hour, minute, second = int(day), int(hour), int(minute), int(second)
    if month is None or not 1 <= day <= _DAYS_IN_MONTH[month - 1] or hour > 23 or minute > 59 or second > 59:
        return None
    return month, day, hour, minute, second


def run_dir_name(rank: int) -> str:
    return f"{format_stamp()}-rank{rank}-{uuid.uuid4().hex[:8]}"


def find_resume_dir(root: str, rank: int, start: str, end: str) -> Optional[str]:
    """The latest run directory of `rank` directly under `root` whose stamp lies in [start, end], or None.

    Only real directories count: a symbolic link named like a run directory could point anywhere, and the
    resumed run writes into what it finds. Ties (two runs in one second) go to the newer directory.
    """
    low, high = parse_stamp(start), parse_stamp(end)
    if low is None or high is None or not os.path.isdir(root):
        return None
    real_root = os.path.realpath(root)
    best = None
    with os.scandir(root) as entries:
        for entry in entries:
            match = _RUN_DIR.match(entry.name)
            if not match or int(match.group(2)) != rank or not entry.is_dir(follow_symlinks=False):
                continue
            stamp = parse_stamp(match.group(1))
            if stamp is None or not low <= stamp <= high:
                continue
            if os.path.dirname(os.path.realpath(entry.path)) != real_root:
                continue
            key = (stamp, entry.stat(follow_symlinks=False).st_mtime_ns, entry.name)
            if best is None or key > best[0]:
                best = (key, entry.path)
    return os.path.abspath(best[1]) if best else None
