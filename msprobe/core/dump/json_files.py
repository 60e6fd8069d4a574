"""The JSON files of one dump step: encoded one entry per line, and written all or none.

`encode_dump_bytes` gives the UTF-8 text of dump.json / stack.json / construct.json / debug.json (the content of
`json.dumps(obj, indent=1)`, one entry per line, encoded by orjson or the json module's C encoder; with orjson
a small step's files take ~2 ms, and the writer encodes them on the training thread: writer.py).
`write_json_files` writes a step's files as a set: every file goes to a temporary name first and only when
all of them are complete are they renamed into place, so a full disk leaves either the whole new set or none
of it (the temporary files are removed), never a dump.json without its stack.json. The files are not forced to
the device (no fsync): the kernel writes them back as it writes any file. Used by the writer thread and by the
JSON helper process (json_helper.py).
"""
import json
import math
import os
import time

from msprobe.core.paths import DIR_MODE, FILE_MODE

__all__ = ["encode_dump_bytes", "encode_dump_json", "holds_nonfinite", "write_json_files"]

try:  # ~7x faster than the json module; optional
    import orjson
except ImportError:
    orjson = None  # type: ignore[assignment]

_compact = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
_YIELD_EVERY = 32  # entries encoded between two GIL hand-offs to the training thread


def holds_nonfinite(value, depth=0):
    """Whether a float nested in `value` (dicts, lists, tuples) is a NaN or an infinity (orjson writes those as
    null)."""
    if isinstance(value, float):
        return not math.isfinite(value)
    if depth > 64:
        return True
    if isinstance(value, dict):
        value = value.values()
    elif not isinstance(value, (list, tuple)):
        return False
    return any(holds_nonfinite(item, depth + 1) for item in value)


def _fallback(value):
    """Compact JSON bytes of one value by the json module (NaN, Infinity, -Infinity written as the reference's files
    hold them; ints of any size)."""
    return _compact(value).encode("utf-8")


def _encode(value):
    """Compact JSON bytes of one value. orjson writes NaN and Infinity as null: a text holding a null whose value
    holds such a float is encoded again by the json module (None and NaN-free nulls keep orjson's text)."""
    if orjson is not None:
        try:
            text = orjson.dumps(value)
        except TypeError:  # a value orjson does not take (e.g. an int over 64 bits)
            return _fallback(value)
        if b"null" not in text or not holds_nonfinite(value):
            return text
    return _fallback(value)


def _key(key):
    return orjson.dumps(key) if orjson is not None and type(key) is str else _fallback(str(key))


def _entries(mapping, indent, share_gil, lists=None, finite=False):
    pad = b" " * indent
    if orjson is not None and lists is None and not share_gil and type(mapping) is dict:
        text = _entries_at_once(mapping, pad, finite)
        if text is not None:
            return text
    # stack.json: every call from one code location shares one list object; `lists` keeps their texts across steps
    memo = {} if lists is None else lists
    lines = []
    for count, (key, value) in enumerate(mapping.items(), 1):
        if type(value) is list:
            known = memo.get(id(value))
            if known is not None and known[0] is value:
                text = known[1]
            else:
                text = _encode(value)
                memo[id(value)] = (value, text)
        elif value is None:  # construct.json of an L1/L2 dump: every parent is null
            text = b"null"
        else:
            text = _encode(value)
        lines.append(b"%s%s: %s" % (pad, _key(key), text))
        if share_gil and not count % _YIELD_EVERY:
            # the json module's C encoder never releases the GIL; without this a training thread, which releases
            # it in every framework op, waits a whole switch interval (5 ms) to get it back each time
            time.sleep(0)
    return b"{\n" + b",\n".join(lines) + b"\n" + pad[:-1] + b"}" if lines else b"{}"


def _entries_at_once(mapping, pad, finite):
    """_entries' layout of a dict with str keys, each key and value encoded by orjson in one comprehension (no
    Python frame per entry); None where a key is not a str or orjson refuses a value (the loop serves). finite: the
    caller knows no float in the values is a NaN or an infinity (the dump's RecordBuilder.finite), so a null in a
    text is a None and no value is walked."""
    if not mapping:
        return b"{}"
    dumps = orjson.dumps
    try:
        keys = [dumps(key) for key in mapping if type(key) is str]
        texts = [dumps(value) for value in mapping.values()]
    except TypeError:  # e.g. an int over 64 bits
        return None
    if len(keys) != len(texts):
        return None
    if not finite:
        for index, value in enumerate(mapping.values()):
            if b"null" in texts[index] and holds_nonfinite(value):
                texts[index] = _fallback(value)
    head = b"%s%%s: %%s" % pad
    return b"{\n" + b",\n".join([head % pair for pair in zip(keys, texts)]) + b"\n" + pad[:-1] + b"}"


def encode_dump_bytes(obj, share_gil=False, lists=None, finite=False):
    """UTF-8 JSON with one entry per line: top-level keys, and every entry of "data" (or of a flat mapping such as
    stack.json) on its own line, each entry compact. Same content as indent=1, but each entry encoded by orjson (the
    json module's C encoder where orjson is missing or the entry holds NaN or Infinity; indent=1 would force the
    pure-Python one, ~4x slower). share_gil: hand the GIL over every few entries (off the training thread).
    lists: a dict the caller keeps across calls, in which the text of each list value of a flat mapping is kept
    with the list (stack.json's lists are the same objects every step); such a list must not change afterwards.
    finite: no float in the entries of "data" is a NaN or an infinity (the dump's records know it), so orjson's nulls
    are all Nones and no entry is walked to find out."""
    if not isinstance(obj, dict):
        return _encode(obj)
    if "data" in obj and isinstance(obj["data"], dict):
        lines = [b" %s: %s" % (_key(key), _entries(value, 2, share_gil, None, finite) if key == "data" else _encode(value))
                 for key, value in obj.items()]
        return b"{\n" + b",\n".join(lines) + b"\n}"
    return _entries(obj, 1, share_gil, lists)


def encode_dump_json(obj, share_gil=True):
    """encode_dump_bytes as text."""
    return encode_dump_bytes(obj, share_gil).decode("utf-8")


def remove_file(path):
    """Unlink `path`; no file there is no error."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _write_new_file(path, data):
    """Write `data` into a new file at `path` (a leftover of that name is replaced, never written into)."""
    remove_file(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        # no fsync: the set is complete for every reader once renamed, and a crash of the training process loses
        # nothing handed over; forcing three files a step to the device (a journal commit each) cost ~2.5 ms of a
        # 35 ms dumped step on the 2-core machine (docs/performance.md), and blocks the writer on network storage
        os.fchmod(fd, FILE_MODE)  # whatever the umask
    finally:
        os.close(fd)


def _linked(source, path):
    """`path` a new hard link to `source`; False where that cannot be (no such file, another file system...)."""
    try:
        remove_file(path)
        os.link(source, path)
    except OSError:
        return False
    return True


def write_json_files(directory, files, share_gil=True, links=None):
    """Encode each (name, object) of `files` (bytes: already encoded) and write them into `directory` as one set: all of them
    renamed into place once every one is on disk, or none (temporary files removed, the error raised). links: {name:
    path of a file with that very content} (an earlier step's): hard-linked instead of written where the file system
    allows it."""
    written = []
    if not os.path.isdir(directory):
        os.makedirs(directory, DIR_MODE, exist_ok=True)
    try:
        for name, obj in files:
            temporary = os.path.join(directory, f".{name}.{os.getpid()}.tmp")
            written.append((temporary, os.path.join(directory, name)))
            if links and name in links and _linked(links[name], temporary):
                continue
            _write_new_file(temporary, obj if isinstance(obj, bytes) else encode_dump_bytes(obj, share_gil))
    except BaseException:
        for temporary, _ in written:
            try:
                os.unlink(temporary)
            except OSError:
                pass
        raise
    for temporary, final in written:
        os.replace(temporary, final)
