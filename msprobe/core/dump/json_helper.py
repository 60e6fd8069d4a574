"""The JSON files of a dump, encoded and written by a helper process where orjson is missing.

With orjson (a base dependency) the writer encodes a step's files on the training thread (writer.py); this
helper serves installs without it. The json module's encoder holds the GIL for as long as it runs (~10 ms a
step for a small GPT), and a training thread, which gives the GIL up in every framework op, would then wait up
to a switch interval (5 ms) to get it back each time. `marshal` serialises the same dicts,
tuples and floats in ~1 ms; a helper process (plain Python, no framework imported) unmarshals them,
encodes the JSON and writes the step's files as a set (json_files.py), without our GIL.

Protocol on the helper's stdin: an 8-byte little-endian length, then
marshal.dumps((directory, [(file name, object), ...])). For each message the helper answers on its
stdout b"." when the files are on disk, or b"!" + a 4-byte length + the error text.

Set MSPROBE_JSON_HELPER=0 to encode in the writer thread instead.
"""
import atexit
import marshal
import os
import struct
import subprocess
import sys
import threading

from msprobe.core.log import logger

__all__ = ["JsonHelper", "HelperError", "json_helper", "serve"]

_HEADER = struct.Struct("<Q")
_ERROR_LENGTH = struct.Struct("<I")
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
_BOOT = "import sys; sys.path.insert(0, sys.argv[1]); from msprobe.core.dump.json_helper import serve; serve()"


class HelperError(OSError):
    """The helper could not write a file (the message says which and why)."""


class JsonHelper:
    """Client side: one helper process per training process, started on first use."""

    def __init__(self):
        self._process = None
        self._owner_pid = None
        self._lock = threading.Lock()
        self._disabled = os.environ.get("MSPROBE_JSON_HELPER", "1") == "0"
        atexit.register(self.close)

    def _running(self):
        if self._process is not None and self._owner_pid == os.getpid() and self._process.poll() is None:
            return True
        if self._disabled:
            return False
        try:
            self._process = subprocess.Popen([sys.executable, "-c", _BOOT, _PACKAGE_ROOT], stdin=subprocess.PIPE,
                                             stdout=subprocess.PIPE, close_fds=True)
            self._owner_pid = os.getpid()  # a forked child must not share the parent's pipes
            return True
        except (OSError, ValueError) as exc:
            self._give_up(f"cannot start the JSON helper process ({exc})")
            return False

    def _give_up(self, reason):
        self._disabled = True
        self._process = None
        logger.warning(f"msprobe: {reason}; dump JSON files are encoded in the writer thread instead.")

    def write(self, directory, files):
        """Write {name: object} into `directory`; False when the caller must write them itself
        (helper unavailable, or a value marshal cannot carry). Raises HelperError on a write failure."""
        try:
            payload = marshal.dumps((directory, list(files.items())))
        except ValueError:
            return False
        with self._lock:
            if not self._running():
                return False
            process = self._process
            try:
                process.stdin.write(_HEADER.pack(len(payload)))
                process.stdin.write(payload)
                process.stdin.flush()
                reply = process.stdout.read(1)
                if reply == b"!":
                    size = _ERROR_LENGTH.unpack(process.stdout.read(_ERROR_LENGTH.size))[0]
                    raise HelperError(process.stdout.read(size).decode("utf-8", "replace"))
            except (BrokenPipeError, ValueError, struct.error) as exc:
                self._give_up(f"the JSON helper process stopped ({exc})")
                return False
            if reply != b".":
                self._give_up(f"the JSON helper process stopped (exit code {process.poll()})")
                return False
            return True

    def close(self):
        """Let the helper finish and exit (at interpreter exit, or when the caller is done)."""
        with self._lock:
            process, self._process = self._process, None
            if process is None or self._owner_pid != os.getpid():
                return
            try:
                process.stdin.close()
                process.wait(timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                process.kill()


_HELPER = None
_HELPER_LOCK = threading.Lock()


def json_helper():
    """The process-wide helper client."""
    global _HELPER
    with _HELPER_LOCK:
        if _HELPER is None:
            _HELPER = JsonHelper()
        return _HELPER


def _read_exactly(stream, size):
    data = stream.read(size)
    return data if len(data) == size else None


def serve(stdin=None, stdout=None):
    """The helper's loop: until stdin closes, write each message's files and answer."""
    from msprobe.core.dump.json_files import write_json_files

    stdin = stdin or sys.stdin.buffer
    stdout = stdout or sys.stdout.buffer
    while True:
        header = _read_exactly(stdin, _HEADER.size)
        if header is None:
            return
        payload = _read_exactly(stdin, _HEADER.unpack(header)[0])
        if payload is None:
            return  # the training process died while sending: nothing complete to write
        directory, files = marshal.loads(payload)
        try:
            write_json_files(directory, files, share_gil=False)  # no training thread here
            stdout.write(b".")
        except Exception as exc:  # reported to the training process, which logs it
            text = f"{type(exc).__name__}: {exc}".encode("utf-8")
            stdout.write(b"!" + _ERROR_LENGTH.pack(len(text)) + text)
        stdout.flush()
