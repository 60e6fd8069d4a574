"""A dump given as a file or as a folder: the rank-folder names every layout uses, and the dump.json(s) a path means.

Layouts read: `dump_path/step<S>/rank/dump.json` (a single process, 1.2.1 and ours), `.../rank<N>/dump.json`
(distributed) and `.../proc<PID>/dump.json` (26.x, a process without a distributed rank). A command that takes a
dump.json accepts any of: the file, its rank folder, a step folder, or the dump root; `dump_json_of` says which
file that is (one-line error when the folder holds several, naming them), `dump_framework` which framework wrote
it (the `framework` field of dump.json's header). Nothing here reads more than a dump.json's first few kilobytes.
"""
import os
import re
from typing import List, Optional

from msprobe.core.errors import PathError
from msprobe.core.log import logger
from msprobe.core.paths import check_path

__all__ = ["RANK_FOLDER", "MAX_FOLDER_NUMBER", "rank_label", "rank_folder_name", "label_rank", "folder_number",
           "dump_jsons", "dump_json_of", "dump_framework"]

#: a rank folder: `rank` (single process), `rank<N>`, or 26.x's `proc<PID>` (no distributed rank); ASCII digits only
RANK_FOLDER = re.compile(r"(?:rank([0-9]*)|proc([0-9]+))\Z", re.ASCII)
_STEP_FOLDER = re.compile(r"step([0-9]+)\Z", re.ASCII)
_FRAMEWORK = re.compile(rb'"framework"\s*:\s*"([A-Za-z]+)"')
_HEADER_BYTES = 4096
MAX_FOLDER_NUMBER = 2 ** 31 - 1  # steps and ranks are stored as 32-bit integers (trend's INTEGER columns)


def _looks_like(name: str, prefix: str, where: Optional[str]) -> None:
    """Warn (when `where` is given) about a name that starts like a `prefix<N>` folder but is not one in ASCII
    digits up to MAX_FOLDER_NUMBER (`rank٠`, a newline, 2^31): folder names come from data and become paths
    and pairs, so such a folder is skipped and said, never taken for another number nor dropped silently."""
    if where is None or not any(c.isdigit() or c.isspace() or not c.isprintable() for c in name[len(prefix):]):
        return  # another word (`steps`, `ranking`): not a folder of the job
    shown = name.encode("unicode_escape").decode("ascii")  # one line, whatever the name holds
    logger.warning("%s: folder '%s' is skipped: not %s<N> in ASCII digits up to %d.", where, shown[:120], prefix,
                   MAX_FOLDER_NUMBER)


def rank_label(name: str, where: Optional[str] = None) -> Optional[str]:
    """The label of a rank folder name: '' for `rank`, '3' for `rank3`, 'proc812' for `proc812`; None otherwise
    (with a warning naming a near miss when `where`, the folder it was found in, is given)."""
    match = RANK_FOLDER.match(name)
    if match is not None and int(match.group(1) or match.group(2) or 0) <= MAX_FOLDER_NUMBER:
        return match.group(1) if match.group(2) is None else f"proc{match.group(2)}"
    for prefix in ("rank", "proc"):
        if name.startswith(prefix):
            _looks_like(name, prefix, where)
    return None


def folder_number(name: str, kind: str, where: Optional[str] = None) -> Optional[str]:
    """The digits of a `step<N>` folder name (kind "step"), or of a `rank`/`rank<N>` one (kind "rank": "" for a bare
    `rank`; 26.x's `proc<PID>` is not a rank number, see rank_label); None otherwise, with a warning naming a near
    miss when `where` is given."""
    if kind == "step":
        match = _STEP_FOLDER.match(name)
        if match is not None and int(match.group(1)) <= MAX_FOLDER_NUMBER:
            return match.group(1)
        if name.startswith("step"):
            _looks_like(name, "step", where)
        return None
    label = rank_label(name, where)
    return None if label is None or label.startswith("proc") else label


def rank_folder_name(label: str) -> str:
    """The folder name of a rank label (rank_label's inverse)."""
    return label if label.startswith("proc") else f"rank{label}"


def label_rank(label: str) -> int:
    """The rank number of a label: N for `rank<N>`, 0 for `rank` and for a `proc<PID>` (a process that had no
    distributed rank is a single-process run)."""
    return int(label) if label.isdigit() else 0


def _rank_folders(step_folder: str) -> List[str]:
    found = []
    for name in sorted(os.listdir(step_folder)):
        full = os.path.join(step_folder, name)
        if rank_label(name) is not None and os.path.isfile(os.path.join(full, "dump.json")):
            found.append(full)
    return found


def dump_jsons(path: str, what: str = "dump path") -> List[str]:
    """Every dump.json a path means: the file itself; the folder's own dump.json; its rank folders' (a step
    folder); its step folders' rank folders' (a dump root). In step, then folder-name order."""
    path = check_path(path, what=what, allow_symlink=True)
    if os.path.isfile(path):
        return [path]
    if os.path.isfile(os.path.join(path, "dump.json")):
        return [os.path.join(path, "dump.json")]
    steps = sorted((int(m.group(1)), os.path.join(path, name)) for name in os.listdir(path)
                   for m in [_STEP_FOLDER.match(name)] if m and os.path.isdir(os.path.join(path, name)))
    folders = [folder for _, step in steps or [(0, path)] for folder in _rank_folders(step)]
    if not folders:
        raise PathError(f"{what} '{path}' holds no dump.json: give a dump.json, its rank folder (rank, rank<N>, "
                        "proc<PID>), a step folder or the dump root.")
    return [os.path.join(folder, "dump.json") for folder in folders]


def dump_json_of(path: str, what: str = "dump path") -> str:
    """The one dump.json a path means (see dump_jsons); a folder holding several is refused, naming a few."""
    found = dump_jsons(path, what)
    if len(found) > 1:
        shown = ", ".join(os.path.relpath(os.path.dirname(p), path) for p in found[:3])
        more = f" and {len(found) - 3} more" if len(found) > 3 else ""
        raise PathError(f"{what} '{path}' holds {len(found)} dumps ({shown}{more}); give one rank folder or its "
                        "dump.json.")
    return found[0]


def dump_framework(path: str, what: str = "dump path") -> Optional[str]:
    """'pytorch' / 'mindspore' as the first dump.json under `path` records it in its header; None when it does not."""
    with open(dump_jsons(path, what)[0], "rb") as handle:
        head = handle.read(_HEADER_BYTES)
    data_at = head.find(b'"data"')
    match = _FRAMEWORK.search(head[:data_at] if data_at >= 0 else head)
    return match.group(1).decode().lower() if match else None
