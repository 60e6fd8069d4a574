"""Cheap call-stack capture for stack.json: walk frames, format once per code location.

Formatting a frame (reading the source line) is the expensive part, so formatted lines are cached by (code object,
line number), and a whole stack by a token naming its frames' code objects and bytecode offsets (several offsets of
one line give equal stacks; the frames the text leaves out, msprobe's own and `skip_files`, are left out of it too).
The token is built from the outermost frame inwards, one interned (code, offset, token
of the frames above) at a time, so a capture walks only the frames that are new since the last one: the frames of
the last capture are kept (not those left out of the text: msprobe's hooks return with the call), and the first of
them met again (the same frame object, still running) is an anchor
whose callers cannot have moved since (they wait for it to return); only its own offset is read again. Generator and
coroutine frames are never anchors (they can be resumed from another caller). The kept frames are let go by
`release()` (the collector calls it when a step's records are handed over), so at most one call's frames outlive it.
Frames inside msprobe itself and inside the framework's hook machinery are left out of the text.
"""
import inspect
import linecache
import os
import sys

__all__ = ["StackCapture"]

# frames that can be suspended and resumed by another caller: never anchors
_RESUMABLE = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE
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
        self._codes = set()  # keeps the ids in tokens from being reused
        self._tokens = {}  # (id(code), bytecode offset, token of the frames above) -> token
        self._chain = []  # the frames of the last capture, outermost first
        self._above = []  # the token of the frames above each of them
        self._position = {}  # id(frame) -> its position in _chain
        self._hidden = {}  # id(code) -> whether its frames are left out of the text (msprobe's own, skip_files): they
        # are left out of the token and never kept either (keeping a frame that returns makes CPython copy its locals)

    def release(self):
        """Let the frames of the last capture go (a returned frame keeps its locals while it is referenced)."""
        self._chain, self._above, self._position = [], [], {}

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
        chain, above, position, hidden = self._chain, self._above, self._position, self._hidden
        walked = []
        walk = frame
        start, token = 0, 0
        while walk is not None:  # the frames new since the last capture, up to an anchor
            code = walk.f_code
            skip = hidden.get(id(code))
            if skip is None:
                skip = hidden[id(code)] = self._skipped(code.co_filename)
                self._codes.add(code)  # its id is never another code's
            if not skip:
                at = position.get(id(walk))
                if at is not None and chain[at] is walk and not code.co_flags & _RESUMABLE:
                    start, token = at, above[at]
                    walked.append(walk)  # the anchor's own offset is read again
                    break
                walked.append(walk)
            walk = walk.f_back
        for dropped in chain[start:]:
            position.pop(id(dropped), None)
        del chain[start:], above[start:]
        tokens = self._tokens
        for walk in reversed(walked):
            position[id(walk)] = len(chain)
            chain.append(walk)
            above.append(token)
            code = walk.f_code
            # ints only (hashing code objects is slow), and the bytecode offset rather than f_lineno (which decodes
            # the line table on every read)
            key = (id(code), walk.f_lasti, token)
            found = tokens.get(key)
            if found is None:
                found = tokens[key] = len(tokens) + 1
                self._codes.add(code)
            token = found
        stack = self.stacks.get(token)
        if stack is None:
            stack = []
            while frame is not None:
                code = frame.f_code
                if len(stack) < self.max_depth and not self._skipped(code.co_filename):
                    stack.append(self._format(code, frame.f_lineno))
                frame = frame.f_back
            self.stacks[token] = stack
        return stack
