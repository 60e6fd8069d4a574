"""Path safety and file writing: validated paths, 0640 files, 0750 dirs, atomic writes.

Every path a user gives us goes through `check_path` so that a bad path fails early with a
message naming it, instead of a traceback deep inside a writer.
"""
import json
import os
import re
import tempfile

from msprobe.core.errors import ParseError, PathError

__all__ = ["FILE_MODE", "DIR_MODE", "check_path", "make_dir", "atomic_write_text",
           "atomic_write_json", "load_json", "load_yaml", "safe_name"]

FILE_MODE = 0o640
DIR_MODE = 0o750
MAX_PATH_LEN = 4096
MAX_NAME_LEN = 255
_SAFE_PATH = re.compile(r"^[\w./\-:~+=@, ]+$")
_UNSAFE_NAME_CHARS = re.compile(r"[^\w.\-]")


def safe_name(text):
    """`text` with every character that is unsafe in a file name replaced by '_'."""
    return _UNSAFE_NAME_CHARS.sub("_", str(text))[:MAX_NAME_LEN]


def check_path(path, kind="any", must_exist=True, writable=False, allow_symlink=False, what="path"):
    """Validate a user-supplied path and return it absolute.

    kind: "file", "dir" or "any". `what` names the path in error messages ("dump_path", "-i").
    """
    if not isinstance(path, (str, os.PathLike)) or not str(path).strip():
        raise PathError(f"{what} must be a non-empty path string, got {path!r}.")
    text = os.path.expanduser(str(path))
    if len(text) > MAX_PATH_LEN or any(len(p) > MAX_NAME_LEN for p in text.split(os.sep)):
        raise PathError(f"{what} '{text}' is too long.")
    if not _SAFE_PATH.match(text):
        raise PathError(f"{what} '{text}' contains special characters; use letters, digits and ._-/ only.")
    if os.path.islink(text.rstrip(os.sep)) and not allow_symlink:
        raise PathError(f"{what} '{text}' is a symbolic link; give the real path instead.")
    full = os.path.abspath(text)
    if not os.path.exists(full):
        if must_exist:
            raise PathError(f"{what} '{text}' does not exist.")
        parent = os.path.dirname(full) or "."
        if writable and os.path.isdir(parent) and not os.access(parent, os.W_OK):
            raise PathError(f"{what} '{text}' cannot be created: no write permission on '{parent}'.")
        return full
    if kind == "file" and not os.path.isfile(full):
        raise PathError(f"{what} '{text}' is not a file.")
    if kind == "dir" and not os.path.isdir(full):
        raise PathError(f"{what} '{text}' is not a directory.")
    if not os.access(full, os.R_OK):
        raise PathError(f"{what} '{text}' is not readable.")
    if writable and not os.access(full, os.W_OK):
        raise PathError(f"{what} '{text}' is not writable.")
    return full


def make_dir(path, what="directory"):
    """Create `path` (and parents) with mode 0750 if missing; return it absolute."""
    full = check_path(path, kind="dir", must_exist=False, writable=True, what=what)
    try:
        os.makedirs(full, mode=DIR_MODE, exist_ok=True)
    except OSError as exc:
        raise PathError(f"cannot create {what} '{full}': {exc.strerror}.") from None
    return full


def atomic_write_text(path, text, mode=FILE_MODE):
    """Write `text` to `path` through a temporary file and rename, so readers never see half a file."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, mode=DIR_MODE, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp_", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def atomic_write_json(path, obj, indent=1):
    """Atomically write `obj` as JSON (indent 1 like the reference's dump files)."""
    atomic_write_text(path, json.dumps(obj, indent=indent, ensure_ascii=False))


def load_json(path, what="JSON file"):
    """Load a JSON file; a missing, corrupt or truncated file raises a message naming it."""
    full = check_path(path, kind="file", what=what, allow_symlink=True)
    try:
        with open(full, encoding="utf-8") as handle:
            return json.load(handle)
    except json.JSONDecodeError as exc:
        raise ParseError(f"{what} '{full}' is not valid JSON (line {exc.lineno}, column {exc.colno}): "
                         f"{exc.msg}. Is it truncated?") from None
    except UnicodeDecodeError:
        raise ParseError(f"{what} '{full}' is not UTF-8 text.") from None


def load_yaml(path, what="YAML file"):
    """Load a YAML file with the safe loader; errors name the file."""
    import yaml

    full = check_path(path, kind="file", what=what, allow_symlink=True)
    try:
        with open(full, encoding="utf-8") as handle:
            return yaml.safe_load(handle)
    except yaml.YAMLError as exc:
        raise ParseError(f"{what} '{full}' is not valid YAML: {exc}") from None
