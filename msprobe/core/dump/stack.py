"""Cheap call-stack capture for stack.json: walk frames, format once per code location.

Formatting a frame (reading the source line) is the expensive part, so formatted lines are
cached by (code object, line number); a whole stack is cached by its frames' code objects and bytecode
offsets (several offsets of one line give equal stacks).
Frames inside msprobe itself and inside the framework's hook machinery are skipped.
"""
import linecache
import os
import sys

__all__ = ["StackCapture"]

_MSPROBE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep


class StackCapture:
    """capture() -> list of 'File {path}, line {n}, in {func}, \\n {source}' lines, innermost first.

    skip_files: extra file-path substrings to leave out (e.g. torch/overrides.py).
    """

    def __init__(self, skip_files=(), max_depth=64):
        self.skip_files = tuple(skip_files)
        self.max_depth = max_depth
        self._line_cache = {}
        self.stacks = {}
        self._skip_cache = {}
        self._codes = set()

    def _skipped(self, filename):
        hit = self._skip_cache.get(filename)
        if hit is None:
            hit = filename.startswith(_MSPROBE_DIR) and os.sep + "examples" + os.sep not in filename
            hit = hit or any(part in filename for part in self.skip_files)
            self._skip_cache[filename] = hit
        return hit

    def _format(self, code, lineno):
        key = (code, lineno)
        line = self._line_cache.get(key)
        if line is None:
            source = linecache.getline(code.co_filename, lineno).strip()
            line = f"File {code.co_filename}, line {lineno}, in {code.co_name}, \n {source}"
            self._line_cache[key] = line
        return line

    def capture(self, depth=1):
        """The formatted stack of the caller (frames above `depth`), as a list (shared; do not mutate)."""
        frame = sys._getframe(depth)
        key = []
        append = key.append
        # the hot loop: ints only (hashing code objects is slow), no filtering, and the bytecode offset
        # rather than f_lineno (which decodes the line table on every read: 3x the cost of the walk)
        while frame is not None:
            append(id(frame.f_code))
            append(frame.f_lasti)
            frame = frame.f_back
        key = tuple(key)
        stack = self.stacks.get(key)
        if stack is None:
            stack = []
            frame = sys._getframe(depth)
            while frame is not None:
                code = frame.f_code
                self._codes.add(code)  # keeps the ids in cache keys from being reused
                if len(stack) < self.max_depth and not self._skipped(code.co_filename):
                    stack.append(self._format(code, frame.f_lineno))
                frame = frame.f_back
            self.stacks[key] = stack
        return stack
