"""A small streaming zip writer for the xlsx reports, deflating with ISA-L where `isal` is installed.

Deflating the sheet XML was a third of a job compare's time a pair with zlib at level 1 (8 ms for a 1.4 MB
sheet here); ISA-L's level 1 takes 2 ms and its output is a little smaller. `zipfile` offers no way to
give it another compressor, so the members are written here: local headers, deflated data, a central
directory, and the zip64 records once a member, an offset or the member count outgrows the classic
fields (members streamed with `open` reserve their zip64 sizes up front, as `zipfile` does with
`force_zip64`). Without `isal` (an optional dependency, extra `fast`) zlib deflates: the same files,
the same members, other compressed bytes.
"""
import struct
import time
import zlib

try:  # optional: ISA-L's deflate, ~4x zlib's speed at level 1
    from isal import isal_zlib as _isal
except ImportError:  # pragma: no cover - exercised where isal is not installed
    _isal = None  # type: ignore[assignment]

__all__ = ["ZipWriter", "default_codec"]

_LIMIT32 = 0xFFFFFFFF  # from this value on, a size or offset goes to the zip64 records (tests lower it)
_LIMIT16 = 0xFFFF  # likewise the member count
_FULL32, _FULL16 = 0xFFFFFFFF, 0xFFFF  # what a classic field holds when its value is in the zip64 record
_DEFLATED, _VERSION, _VERSION64, _UNIX = 8, 20, 45, 3
_MEMBER_MODE = 0o600 << 16  # what zipfile.writestr gives a member named by a string


def default_codec():
    """The deflate module used when none is given: isal_zlib where installed, else zlib."""
    return _isal or zlib


def _classic(value, limit, full):
    return value if value < limit else full


def _dos_time(now):
    date = (max(now.tm_year, 1980) - 1980) << 9 | now.tm_mon << 5 | now.tm_mday
    return now.tm_hour << 11 | now.tm_min << 5 | now.tm_sec // 2, date


class _Member:
    """A member being written: data in, deflated to the archive; closing patches its local header."""

    def __init__(self, writer, name, reserve64):
        self._writer, self._name, self._reserve64 = writer, name, reserve64
        self._codec = writer.codec
        self._deflate = self._codec.compressobj(writer.level, zlib.DEFLATED, -15)
        self._crc = self._size = self._compressed = 0
        self._header_at = writer.file.tell()
        writer.file.write(writer.local_header(name, 0, 0, 0, reserve64))

    def write(self, data):
        if isinstance(data, str):
            data = data.encode("utf-8")
        self._crc = self._codec.crc32(data, self._crc)
        self._size += len(data)
        out = self._deflate.compress(data)
        self._compressed += len(out)
        self._writer.file.write(out)
        return len(data)

    def close(self):
        out = self._deflate.flush()
        self._compressed += len(out)
        handle = self._writer.file
        handle.write(out)
        if not self._reserve64 and max(self._size, self._compressed) >= _LIMIT32:
            raise ValueError(f"zip member {self._name} outgrew 4 GiB: open it with reserve64=True")
        end = handle.tell()
        handle.seek(self._header_at)
        handle.write(self._writer.local_header(self._name, self._crc, self._compressed, self._size, self._reserve64))
        handle.seek(end)
        self._writer.entries.append((self._name, self._crc, self._compressed, self._size, self._header_at))

    def __enter__(self):
        return self

    def __exit__(self, kind, value, trace):
        if kind is None:
            self.close()


class ZipWriter:
    """Write a zip archive of deflated members to `path`: `writestr(name, data)` for whole members,
    `open(name)` to stream one (a context manager with `write`). `codec` is a zlib-like module
    (default: default_codec())."""

    def __init__(self, path, codec=None, level=1):
        self.codec = codec or default_codec()
        self.level = level
        self.file = open(path, "wb")
        self.entries = []  # (name, crc, compressed size, size, local header offset)
        self._time = _dos_time(time.localtime())

    def local_header(self, name, crc, compressed, size, reserve64):
        encoded = name.encode("ascii")
        extra = struct.pack("<HHQQ", 1, 16, size, compressed) if reserve64 else b""
        if reserve64:
            compressed = size = _FULL32
        return struct.pack("<IHHHHHIIIHH", 0x04034B50, _VERSION64 if reserve64 else _VERSION, 0, _DEFLATED,
                           *self._time, crc, compressed, size, len(encoded), len(extra)) + encoded + extra

    def writestr(self, name, data):
        with _Member(self, name, reserve64=False) as member:
            member.write(data)

    def open(self, name, reserve64=True):
        return _Member(self, name, reserve64)

    def close(self):
        handle = self.file
        start = handle.tell()
        for name, crc, compressed, size, offset in self.entries:
            encoded = name.encode("ascii")
            big = [value for value in (size, compressed, offset) if value >= _LIMIT32]
            extra = struct.pack(f"<HH{len(big)}Q", 1, 8 * len(big), *big) if big else b""
            version = _VERSION64 if big else _VERSION
            handle.write(struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, _UNIX << 8 | version, version, 0, _DEFLATED,
                                     *self._time, crc, _classic(compressed, _LIMIT32, _FULL32),
                                     _classic(size, _LIMIT32, _FULL32), len(encoded), len(extra), 0, 0, 0,
                                     _MEMBER_MODE, _classic(offset, _LIMIT32, _FULL32))
                         + encoded + extra)
        end = handle.tell()
        count, length = len(self.entries), end - start
        if count >= _LIMIT16 or length >= _LIMIT32 or start >= _LIMIT32:
            handle.write(struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, _UNIX << 8 | _VERSION64, _VERSION64, 0, 0,
                                     count, count, length, start))
            handle.write(struct.pack("<IIQI", 0x07064B50, 0, end, 1))
        entries = _classic(count, _LIMIT16, _FULL16)
        handle.write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, entries, entries, _classic(length, _LIMIT32, _FULL32),
                                 _classic(start, _LIMIT32, _FULL32), 0))
        handle.close()

    def __enter__(self):
        return self

    def __exit__(self, kind, value, trace):
        if kind is None:
            self.close()
        else:
            self.file.close()
