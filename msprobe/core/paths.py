"""Path safety and file writing: validated paths, 0640 files, 0750 dirs, atomic writes, safe loading.

Every path a user gives us goes through `check_path` (or `check_dump_path` for the folder a
debugger writes into) so that a bad path fails early with a message naming it, instead of a
traceback deep inside a writer. Every folder msprobe creates goes through `ensure_dir` (0750,
parents included), every file it writes ends 0640. `load_json` / `load_yaml` never run code and
turn any broken file (truncated, binary, nested too deep, absurd numbers) into one ParseError line.
"""
import json
import os
import re
import tempfile

from msprobe.core.bounded_walk import DEFAULT_BUDGET, Walk, check_json_text
from msprobe.core.errors import ParseError, PathError

__all__ = ["FILE_MODE", "DIR_MODE", "check_path", "check_dump_path", "make_dir", "ensure_dir",
           "atomic_write_bytes", "atomic_write_text", "atomic_write_json", "load_json", "load_yaml", "safe_name"]

FILE_MODE = 0o640
DIR_MODE = 0o750
MAX_PATH_LEN = 4096
MAX_NAME_LEN = 255
_SAFE_PATH = re.compile(r"[\w./\-:~+=@, ]+")
_UNSAFE_NAME_CHARS = re.compile(r"[^\w.\-]")
# 1.2.1's rule for the folder a debugger writes into, checked on the absolute path
_DUMP_PATH_CHARS = re.compile(r"[A-Za-z0-9_./\-]+")


def safe_name(text):
    """`text` with every character that is unsafe in a file name replaced by '_'."""
    return _UNSAFE_NAME_CHARS.sub("_", str(text))[:MAX_NAME_LEN]


def _shown(text, limit=120):
    """A path as it appears in a one-line message: quoted, escapes visible, long ones cut."""
    text = repr(str(text))
    return text if len(text) <= limit else text[: limit - 4] + "...'"


def check_path(path, kind="any", must_exist=True, writable=False, allow_symlink=False, what="path"):
    """Validate a user-supplied path and return it absolute.

    kind: "file", "dir" or "any". `what` names the path in error messages ("dump_path", "-i").
    """
    if not isinstance(path, (str, os.PathLike)) or not str(path).strip():
        raise PathError(f"{what} must be a non-empty path string, got {_shown(path, 40)}.")
    text = os.path.expanduser(str(path))
    shown = _shown(text)
    if len(text) > MAX_PATH_LEN or any(len(p) > MAX_NAME_LEN for p in text.split(os.sep)):
        raise PathError(f"{what} {shown} is too long.")
    if not _SAFE_PATH.fullmatch(text):
        raise PathError(f"{what} {shown} contains special characters; use letters, digits and ._-/ only.")
    if os.path.islink(text.rstrip(os.sep)) and not allow_symlink:
        raise PathError(f"{what} {shown} is a symbolic link; give the real path instead.")
    full = os.path.abspath(text)
    if not os.path.exists(full):
        if must_exist:
            raise PathError(f"{what} {shown} does not exist.")
        parent = os.path.dirname(full) or "."
        if writable and os.path.isdir(parent) and not os.access(parent, os.W_OK):
            raise PathError(f"{what} {shown} cannot be created: no write permission on {parent!r}.")
        return full
    if kind == "file" and not os.path.isfile(full):
        raise PathError(f"{what} {shown} is not a file.")
    if kind == "dir" and not os.path.isdir(full):
        raise PathError(f"{what} {shown} is not a directory.")
    if not os.access(full, os.R_OK):
        raise PathError(f"{what} {shown} is not readable.")
    if writable and not os.access(full, os.W_OK):
        raise PathError(f"{what} {shown} is not writable.")
    return full


def _nearest_existing(full):
    """The deepest existing folder of `full` (itself when it exists)."""
    current = full
    while not os.path.lexists(current):
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    return current


def _probe_writable(folder):
    """Whether a folder can be created in `folder` (os.access says yes to root even on read-only trees)."""
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".msprobe_probe_", dir=folder))
    except OSError:
        return False
    return True


def check_dump_path(path, what="dump_path"):
    """Validate the folder a debugger will write into, before training starts; return it absolute.

    As 1.2.1 documents: only letters, digits and `_ . / -` in the absolute path, at most 4096
    characters and 255 per name, not a symbolic link, a folder (or creatable) that we can write to.
    """
    if not isinstance(path, (str, os.PathLike)) or not str(path).strip():
        raise PathError(f"{what} must be a non-empty path string, got {_shown(path, 40)}.")
    text = os.path.expanduser(str(path))
    full = os.path.abspath(text)
    if len(full) > MAX_PATH_LEN or any(len(part) > MAX_NAME_LEN for part in full.split(os.sep)):
        raise PathError(f"{what} {_shown(text, 64)} is too long: at most {MAX_PATH_LEN} characters and "
                        f"{MAX_NAME_LEN} per folder name.")
    if not _DUMP_PATH_CHARS.fullmatch(full):
        raise PathError(f"{what} {_shown(full)} contains special characters; use letters, digits and _ . / - only "
                        "(the check applies to the absolute path).")
    if os.path.islink(text.rstrip(os.sep) or text):
        raise PathError(f"{what} {_shown(text)} is a symbolic link; give the real folder instead.")
    existing = _nearest_existing(full)
    if existing == full and not os.path.isdir(full):
        raise PathError(f"{what} '{full}' exists and is not a folder; give a folder for the dump.")
    if not os.path.isdir(existing):
        raise PathError(f"{what} '{full}' cannot be created: '{existing}' is a file, not a folder.")
    if not (os.access(existing, os.W_OK | os.X_OK) and _probe_writable(existing)):
        where = "is not writable" if existing == full else f"cannot be created: '{existing}' is not writable"
        raise PathError(f"{what} '{full}' {where}.")
    return full


def ensure_dir(path):
    """Create `path` and every missing parent with mode 0750 (umask does not narrow or widen it); return
    it absolute. No validation: for folders msprobe derives itself (step{N}, rank{R}, dump_tensor_data)."""
    full = os.path.abspath(path)
    if os.path.isdir(full):
        return full
    missing = []
    current = full
    while not os.path.isdir(current):
        missing.append(current)
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, DIR_MODE)
        except FileExistsError:
            if not os.path.isdir(folder):
                raise
            continue  # made by another thread or rank meanwhile: theirs, keep its mode
        os.chmod(folder, DIR_MODE)
    return full


def make_dir(path, what="directory"):
    """Validate `path`, then create it and missing parents with mode 0750; return it absolute."""
    full = check_path(path, kind="dir", must_exist=False, writable=True, what=what)
    try:
        ensure_dir(full)
    except OSError as exc:
        raise PathError(f"cannot create {what} '{full}': {exc.strerror or exc}.") from None
    return full


def atomic_write_bytes(path, data, mode=FILE_MODE, durable=True):
    """Write `data` to `path` through a temporary file and rename, so readers never see half a file;
    `durable` also syncs it to the disk before the rename (diagnostics rewritten every step skip that)."""
    directory = ensure_dir(os.path.dirname(os.path.abspath(path)))
    fd, tmp = tempfile.mkstemp(prefix=".tmp_", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def atomic_write_text(path, text, mode=FILE_MODE):
    """`atomic_write_bytes` of UTF-8 text."""
    atomic_write_bytes(path, text.encode("utf-8"), mode)


def atomic_write_json(path, obj, indent=1):
    """Atomically write `obj` as JSON (indent 1 like the reference's dump files)."""
    atomic_write_text(path, json.dumps(obj, indent=indent, ensure_ascii=False))


def _load_text(path, what, parse, format_error):
    """parse(handle) of a UTF-8 file; the format's own error (format_error(exc) -> text, or None when `exc`
    is not one) and every reading failure raise one ParseError line naming the file."""
    full = check_path(path, kind="file", what=what, allow_symlink=True)
    try:
        with open(full, encoding="utf-8") as handle:
            return parse(handle)
    except UnicodeDecodeError:
        raise ParseError(f"{what} '{full}' is not UTF-8 text.") from None
    except RecursionError:
        raise ParseError(f"{what} '{full}' is nested too deeply to be a msprobe file.") from None
    except OSError as exc:
        raise ParseError(f"{what} '{full}' cannot be read: {exc.strerror or exc}.") from None
    except Exception as exc:
        detail = format_error(exc)
        if detail is not None:
            raise ParseError(f"{what} '{full}' {detail}") from None
        if isinstance(exc, ValueError):  # e.g. an integer of more than 4300 digits
            raise ParseError(f"{what} '{full}' holds a value that cannot be read: "
                             f"{str(exc).splitlines()[0]}") from None
        raise


def _json_error(exc):
    if isinstance(exc, json.JSONDecodeError):
        return f"is not valid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}. Is it truncated?"
    return None


def load_json(path, what="JSON file", budget=None):
    """Load a JSON file; a missing, corrupt or truncated file raises a message naming it, and one that holds
    more values than `budget` (bounded_walk's default) allows is refused before it is parsed."""
    def parse(handle):
        text = handle.read()
        check_json_text(text, f"{what} '{path}'", budget or DEFAULT_BUDGET)
        return json.loads(text)
    return _load_text(path, what, parse, _json_error)


def load_yaml(path, what="YAML file", budget=None):
    """Load a YAML file with the safe loader; errors name the file. What it holds is walked once with its
    aliases expanded (bounded_walk's budget, scaled to the file's size), so an alias bomb is refused before
    any caller expands it."""
    import yaml

    def yaml_error(exc):
        return f"is not valid YAML: {' '.join(str(exc).split())}" if isinstance(exc, yaml.YAMLError) else None

    def parse(handle):
        loaded = yaml.safe_load(handle)
        Walk(f"{what} '{path}'", (budget or DEFAULT_BUDGET).for_input(os.path.getsize(path))).check(loaded)
        return loaded
    return _load_text(path, what, parse, yaml_error)
