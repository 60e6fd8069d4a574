"""The folders of a whole job's dump: `step*/rank*/dump.json` under a dump root, as (step, rank, folder).

    for where in job_folders("dump_root"):          # sorted by step, then rank
        where.step, where.rank, where.folder, where.dump_json

Accepted roots: a dump root (step*/rank*), one step folder (rank* inside: step 0) or one rank folder
(a dump.json inside: step 0, rank from its name, else 0). A rank folder without a number ("rank", as a
single-process run writes it, or 26.x's "proc<PID>") is rank 0. Only names are listed; no dump.json is read here.
Folder names come from data: a name that starts like a step or rank folder but is not `step<N>`/`rank<N>` in
ASCII digits (`rank٠`, a newline, a number past 2^31 - 1) is skipped with a warning naming it, never taken for
another folder's number nor dropped silently (dump_paths.folder_number / rank_label).
"""
import os
from dataclasses import dataclass
from typing import List

from msprobe.core.dump_paths import MAX_FOLDER_NUMBER, folder_number, label_rank, rank_label
from msprobe.core.errors import PathError
from msprobe.core.paths import check_path

__all__ = ["RankFolder", "job_folders", "step_dirs", "rank_dirs", "folder_number", "MAX_FOLDER_NUMBER"]



@dataclass(frozen=True)
class RankFolder:
    step: int
    rank: int
    folder: str

    @property
    def dump_json(self) -> str:
        return os.path.join(self.folder, "dump.json")

    @property
    def tag(self) -> str:
        return f"step{self.step}_rank{self.rank}"


def _has_dump(folder) -> bool:
    return os.path.isfile(os.path.join(folder, "dump.json"))


def step_dirs(root) -> List[tuple]:
    """[(step number, folder)] of the step* folders of `root`, by number."""
    found = []
    for name in os.listdir(root):
        number = folder_number(name, "step", root)
        if number is not None and os.path.isdir(os.path.join(root, name)):
            found.append((int(number), os.path.join(root, name)))
    return sorted(found)


def rank_dirs(step_folder) -> List[tuple]:
    """[(rank number, folder)] of the rank* folders of a step folder that hold a dump.json, by number."""
    found = []
    for name in os.listdir(step_folder):
        label = rank_label(name, step_folder)
        full = os.path.join(step_folder, name)
        if label is not None and os.path.isdir(full) and _has_dump(full):
            found.append((label_rank(label), full))
    return sorted(found)


def job_folders(root, what="dump root") -> List[RankFolder]:
    """Every (step, rank) folder with a dump.json under `root`, sorted by step then rank."""
    root = check_path(root, kind="dir", what=what, allow_symlink=True)
    if _has_dump(root):
        label = rank_label(os.path.basename(os.path.normpath(root)), os.path.dirname(root))
        return [RankFolder(0, label_rank(label) if label is not None else 0, root)]
    steps = step_dirs(root) or [(0, root)]
    folders = [RankFolder(step, rank, folder) for step, step_folder in steps for rank, folder in rank_dirs(step_folder)]
    if not folders:
        raise PathError(f"no dump.json found under '{root}': give a dump root (step*/rank*/dump.json), "
                        "a step folder (rank*/dump.json) or a rank folder.")
    return folders
