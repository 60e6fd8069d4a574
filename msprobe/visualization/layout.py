"""Find the graphs to make in a dump path: one dump dir, `rank\\d+` dirs, or `step\\d+/rank\\d+` dirs.

    single:  DIR/{construct,dump,stack}.json                     -> build_{ts}.vis
    ranks:   DIR/rank0/..., DIR/rank1/... (or DIR/rank/)         -> build_rank{N}_{ts}.vis
    steps:   DIR/step0/rank0/..., DIR/step1/...                  -> build_step{S}_rank{N}_{ts}.vis
"""
import os
import re
from dataclasses import dataclass
from typing import List, Optional

from msprobe.core.errors import PathError
from msprobe.core.paths import check_path

__all__ = ["GraphJob", "detect_layout", "list_jobs", "pair_jobs", "SINGLE", "RANKS", "STEPS"]

SINGLE, RANKS, STEPS = "single", "ranks", "steps"
_RANK = re.compile(r"^rank(\d*)$")
_STEP = re.compile(r"^step(\d+)$")
_REQUIRED = ("construct.json", "dump.json")


@dataclass
class GraphJob:
    """One dump directory that becomes one graph; `tag` goes into the output name ('_step0_rank1')."""
    directory: str
    tag: str
    rank: Optional[int]
    step: Optional[int]


def _subdirs(path: str) -> List[str]:
    return sorted(name for name in os.listdir(path) if os.path.isdir(os.path.join(path, name)))


def detect_layout(path: str, what: str) -> str:
    path = check_path(path, kind="dir", what=what, allow_symlink=True)
    entries = os.listdir(path)
    if not entries:
        raise PathError(f"{what} '{path}' is empty; point it at a dump directory (with dump.json, construct.json, "
                        "stack.json) or a folder of rank*/ or step*/rank*/ directories.")
    subdirs = _subdirs(path)
    if "dump_tensor_data" in subdirs or not subdirs or any(name in entries for name in _REQUIRED):
        return SINGLE
    if all(_RANK.match(name) for name in subdirs):
        return RANKS
    if all(_STEP.match(name) for name in subdirs):
        return STEPS
    raise PathError(f"{what} '{path}' mixes folders {subdirs[:4]}; it must hold one dump (dump.json, "
                    "construct.json, stack.json), only rank*/ folders, or only step*/ folders of rank*/.")


def _rank_key(name: str) -> int:
    digits = _RANK.match(name).group(1)
    return int(digits) if digits else -1


def _check_dump_dir(directory: str, what: str) -> None:
    missing = [name for name in _REQUIRED if not os.path.isfile(os.path.join(directory, name))]
    if missing:
        raise PathError(f"{what}: '{directory}' has no {' or '.join(missing)}; dump with level L0 or mix "
                        "(construct.json holds the model structure).")


def _rank_jobs(path: str, step: Optional[int], what: str) -> List[GraphJob]:
    names = [n for n in _subdirs(path) if _RANK.match(n)]
    if not names:
        raise PathError(f"{what}: '{path}' has no rank*/ folders.")
    jobs = []
    for name in sorted(names, key=_rank_key):
        rank = _RANK.match(name).group(1)
        step_tag = f"_step{step}" if step is not None else ""
        directory = os.path.join(path, name)
        _check_dump_dir(directory, what)
        jobs.append(GraphJob(directory, f"{step_tag}_rank{rank}", int(rank) if rank else None, step))
    return jobs


def list_jobs(path: str, what: str) -> List[GraphJob]:
    """The graphs of one side, in rank (and step) order."""
    layout = detect_layout(path, what)
    path = os.path.abspath(path)
    if layout == SINGLE:
        _check_dump_dir(path, what)
        return [GraphJob(path, "", None, None)]
    if layout == RANKS:
        return _rank_jobs(path, None, what)
    jobs = []
    for name in sorted(_subdirs(path), key=lambda n: int(_STEP.match(n).group(1))):
        jobs.extend(_rank_jobs(os.path.join(path, name), int(_STEP.match(name).group(1)), what))
    return jobs


def pair_jobs(npu_path: str, bench_path: str) -> List[tuple]:
    """[(npu job, bench job)] for compare mode: both sides need the same layout and the same step/rank names."""
    npu_layout = detect_layout(npu_path, "npu_path")
    bench_layout = detect_layout(bench_path, "bench_path")
    if npu_layout != bench_layout:
        raise PathError(f"npu_path is a {npu_layout} layout but bench_path is a {bench_layout} layout; "
                        "give both sides the same structure (one dump, rank*/ or step*/rank*/).")
    npu_jobs, bench_jobs = list_jobs(npu_path, "npu_path"), list_jobs(bench_path, "bench_path")
    npu_tags, bench_tags = [j.tag for j in npu_jobs], [j.tag for j in bench_jobs]
    if npu_tags != bench_tags:
        raise PathError(f"npu_path and bench_path hold different step/rank folders ({_tags(npu_tags)} vs "
                        f"{_tags(bench_tags)}); they must correspond one to one.")
    return list(zip(npu_jobs, bench_jobs))


def _tags(tags: List[str]) -> str:
    return ", ".join(t.lstrip("_") or "single" for t in tags[:6]) + (" ..." if len(tags) > 6 else "")
