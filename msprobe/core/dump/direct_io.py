"""Tensor files written around the page cache (O_DIRECT), from a few reused page-aligned buffers.

A tensor dump writes hundreds of MB per step. Through the page cache every 4 KB of it needs a fresh
page of memory, and on virtual machines that hand free memory back to their host a fresh page costs a
fault in the host (~8.5 us measured here: 334 MB of files took ~1 s of CPU per step). With O_DIRECT
the bytes go from our buffer to the device: no page-cache pages, little CPU, and the file is on the
device when the write returns. O_DIRECT wants the buffer address, the length and the file offset
aligned to the device block, so a file is assembled in a page-aligned buffer (taken from a pool: fresh
buffers would fault their pages in every time), its whole blocks are written in one O_DIRECT call and
the last partial block through the page cache (cheaper than padding and truncating: a truncate is a
journal transaction per file). Files under one block, and every file where O_DIRECT is refused (tmpfs,
some network file systems, non-Linux), are written through the page cache.

    with DirectFile(path, capacity) as handle:   # capacity: an upper bound of the file size
        handle.write(b"...")                     # any number of writes (bytes, memoryviews)

The file is always a new inode: an existing `path` is unlinked first, never written into (another name,
a hard link, may share its bytes). Set MSPROBE_DIRECT_IO=0 to write every file through the page cache.
"""
import ctypes
import errno
import fcntl
import mmap
import os
import threading

__all__ = ["DirectFile"]

_BLOCK = 4096
_SMALL_COPY = 1 << 16  # shorter pieces are copied holding the GIL (a ctypes call costs more)
_MIN_CLASS = 1 << 16
_PER_CLASS = 2  # spare buffers kept per size class (the writer threads use one each at a time)
_MAX_KEPT = 1 << 26  # larger buffers are not kept: their page faults are small next to their writes
_O_DIRECT = getattr(os, "O_DIRECT", 0)
_refused: set = set()  # st_dev of file systems that refused O_DIRECT
_enabled = os.environ.get("MSPROBE_DIRECT_IO", "1") != "0" and bool(_O_DIRECT)


class _Pool:
    """Page-aligned anonymous buffers by power-of-two size class, reused across files."""

    def __init__(self):
        self._free = {}
        self._lock = threading.Lock()

    def take(self, size):
        size_class = max(_MIN_CLASS, 1 << (size - 1).bit_length())
        with self._lock:
            spare = self._free.get(size_class)
            if spare:
                return spare.pop()
        buffer = mmap.mmap(-1, size_class)
        return buffer, ctypes.addressof(ctypes.c_char.from_buffer(buffer))

    def give(self, entry):
        size_class = len(entry[0])
        if size_class > _MAX_KEPT:
            return
        with self._lock:
            spare = self._free.setdefault(size_class, [])
            if len(spare) < _PER_CLASS:
                spare.append(entry)
                return
        # over the limit: let it go (the ctypes export keeps the mmap alive until collected)


_POOL = _Pool()


class DirectFile:
    """A write-only binary file assembled in memory and written with O_DIRECT on close."""

    def __init__(self, path, capacity, mode=0o640):
        self.path, self.mode = path, mode
        self._entry = _POOL.take(capacity + _BLOCK)
        self._buffer, self._address = self._entry
        self._size = 0
        self._spill = None  # a buffered file object once the content outgrew the buffer

    def write(self, data):
        view = memoryview(data).cast("B")
        count = len(view)
        if self._spill is not None:
            self._spill.write(view)
            return count
        if self._size + count > len(self._buffer):
            self._start_spill()
            self._spill.write(view)
            return count
        if count >= _SMALL_COPY:
            # copied without the GIL, so the training thread keeps running
            ctypes.memmove(self._address + self._size, _address_of(view), count)
        else:
            self._buffer[self._size:self._size + count] = view
        self._size += count
        return count

    def write_from(self, address, count):
        """Write `count` bytes found at memory `address` (a tensor's storage), copied without the GIL."""
        if self._spill is None and self._size + count <= len(self._buffer):
            ctypes.memmove(self._address + self._size, address, count)
            self._size += count
        else:
            self.write((ctypes.c_char * count).from_address(address))
        return count

    def flush(self):
        pass

    def _start_spill(self):
        handle = os.fdopen(_create_new(self.path, os.O_WRONLY, self.mode), "wb")  # closed in close()
        handle.write(memoryview(self._buffer)[:self._size])
        self._spill = handle

    def close(self):
        try:
            if self._spill is not None:
                self._spill.close()
            else:
                self._write_out()
            os.chmod(self.path, self.mode)
        finally:
            entry, self._entry = self._entry, None
            if entry is not None:
                _POOL.give(entry)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _write_out(self):
        size = self._size
        aligned = size - size % _BLOCK
        view = memoryview(self._buffer)
        if _enabled and aligned:
            directory_device = _device_of(os.path.dirname(os.path.abspath(self.path)))
            if directory_device not in _refused:
                done = self._write_direct(view, size, aligned)
                if done:
                    return
                if done is None:
                    _refused.add(directory_device)
        fd = _create_new(self.path, os.O_WRONLY, self.mode)
        try:
            _write_all(fd, view[:size])
        finally:
            os.close(fd)

    def _write_direct(self, view, size, aligned):
        """Whole blocks with O_DIRECT, the rest through the page cache: True when written, False after a short
        write, None when the file system refuses O_DIRECT (EINVAL). Other errors (a full disk) are raised."""
        try:
            fd = _create_new(self.path, os.O_WRONLY | _O_DIRECT, self.mode)
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
            return None
        try:
            if not _write_all(fd, view[:aligned]):
                return False
            if size > aligned:  # the last partial block, through the page cache
                fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~_O_DIRECT)
                return _write_all(fd, view[aligned:size])
            return True
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
            return None
        finally:
            os.close(fd)


def _create_new(path, flags, mode):
    """Open a new file at `path` (O_EXCL); an existing one is unlinked first, never written into."""
    try:
        return os.open(path, flags | os.O_CREAT | os.O_EXCL, mode)
    except FileExistsError:
        os.unlink(path)
        return os.open(path, flags | os.O_CREAT | os.O_EXCL, mode)


def _write_all(fd, view):
    """Write the whole view; False when a short write left the rest (then the caller rewrites it)."""
    written = 0
    while written < len(view):
        count = os.write(fd, view[written:])
        if count <= 0:
            return False
        written += count
    return True


def _device_of(directory):
    try:
        return os.stat(directory).st_dev
    except OSError:
        return None


def _address_of(view):
    """Address of a contiguous read-only or writable buffer, without copying it."""
    import numpy as np

    return np.frombuffer(view, dtype=np.uint8).ctypes.data
