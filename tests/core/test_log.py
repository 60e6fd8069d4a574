"""Log format and MSPROBE_LOG_LEVEL."""
import re
import subprocess
import sys


def _log(level):
    code = ("from msprobe.core.log import logger; logger.debug('d'); logger.info('i'); "
            "logger.warning('w'); logger.error('e')")
    env = {"MSPROBE_LOG_LEVEL": str(level), "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env).stdout.splitlines()


def test_format_has_level_timestamp_and_pid():
    lines = _log(1)
    assert re.match(r"^\[INFO\] \d{4}-\d\d-\d\d \d\d:\d\d:\d\d \(\d+\) i$", lines[0])
    assert [line.split()[0] for line in lines] == ["[INFO]", "[WARNING]", "[ERROR]"]


def test_levels_filter_messages():
    assert len(_log(0)) == 4
    assert len(_log(2)) == 2
    assert len(_log(3)) == 1
    assert _log(4) == []
