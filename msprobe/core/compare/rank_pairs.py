"""Rank pairing: which NPU dump.json is compared with which bench dump.json in step*/rank* trees.

Rank folders are `rank`, `rank<N>` and `proc<PID>`; a process folder is paired by its place in the PID order.
`list_rank_dirs` lists what one machine holds; `pair_rank_dirs` pairs the listings of one or several machines
(the Ray engine lists every node); `find_rank_pairs` is both on this machine.
"""
import os

from msprobe.core.dump_paths import folder_number, rank_folder_name, rank_label
from msprobe.core.errors import CompareError
from msprobe.core.log import logger

__all__ = ["find_rank_pairs", "list_rank_dirs", "pair_rank_dirs"]


def _dump_json_in(directory):
    path = os.path.join(directory, "dump.json")
    return path if os.path.isfile(path) else None


def _rank_dirs(directory):
    """{rank label: dir} for rank folders (rank, rank<N>, proc<PID>) holding a dump.json (none where directory
    is missing)."""
    found = {}
    for name in sorted(os.listdir(directory)) if os.path.isdir(directory) else []:
        label = rank_label(name, directory)  # ASCII-checked: names from data become paths and pairs
        full = os.path.join(directory, name)
        if label is not None and os.path.isdir(full) and _dump_json_in(full):
            found[label] = full
    return found


def _counterpart(label, npu_labels, bench_labels):
    """The bench label paired with NPU rank `label`: the same label; the only one when each side has one; a
    process folder (proc<PID>, PIDs differ between runs) the bench's in the same place of the PID order."""
    if label in bench_labels:
        return label
    if len(bench_labels) == 1 and len(npu_labels) == 1:
        return next(iter(bench_labels))
    npu_procs, bench_procs = (sorted((x for x in labels if x.startswith("proc")), key=lambda x: int(x[4:]))
                              for labels in (npu_labels, bench_labels))
    if label in npu_procs and len(npu_procs) == len(bench_procs):
        return bench_procs[npu_procs.index(label)]
    return None


def _layer_dir(root, layer):
    return os.path.join(root, layer) if layer else root


def _step_dirs(root):
    names = os.listdir(root) if os.path.isdir(root) else []
    return {name for name in names if folder_number(name, "step", root) is not None
            and os.path.isdir(os.path.join(root, name))}


def list_rank_dirs(npu_dir, bench_dir):
    """What this machine holds of two dump roots (or step dirs), for pair_rank_dirs:
    {"single": (npu_dir/dump.json exists, bench_dir/dump.json exists),
     "layers": {step dir name of either root, and "" for the roots themselves:
                (npu has it, bench has it, [npu rank labels], [bench rank labels])},
     "files": {every dump.json path listed}}. Missing folders list as empty: a node may hold none of a job,
    or one side only."""
    single = (_dump_json_in(npu_dir), _dump_json_in(bench_dir))
    files = {path for path in single if path}
    layers = {}
    for layer in sorted(_step_dirs(npu_dir) | _step_dirs(bench_dir)) + [""]:
        npu_step, bench_step = _layer_dir(npu_dir, layer), _layer_dir(bench_dir, layer)
        npu_ranks, bench_ranks = _rank_dirs(npu_step), _rank_dirs(bench_step)
        files.update(os.path.join(rank_dir, "dump.json") for rank_dir in [*npu_ranks.values(), *bench_ranks.values()])
        layers[layer] = (os.path.isdir(npu_step), os.path.isdir(bench_step), list(npu_ranks), list(bench_ranks))
    return {"single": tuple(bool(path) for path in single), "layers": layers, "files": files}


def _merge_listings(listings):
    """[(layer, bench has it, {npu labels}, {bench labels})] over machines: the NPU root's step dirs in step
    order, or the roots themselves where no machine has one (as one machine's find_rank_pairs)."""
    merged = {"": [False, False, set(), set()]}
    for listing in listings:
        for layer, (npu_has, bench_has, npu, bench) in listing["layers"].items():
            into = merged.setdefault(layer, [False, False, set(), set()])
            into[0] |= npu_has
            into[1] |= bench_has
            into[2].update(npu)
            into[3].update(bench)
    steps = sorted((layer for layer, into in merged.items() if layer and into[0]), key=lambda d: int(d[4:]))
    return [(layer, *merged[layer][1:]) for layer in steps or [""]]


def pair_rank_dirs(npu_dir, bench_dir, listings):
    """[(tag, npu dump.json, bench dump.json)] from list_rank_dirs of one machine, or of several (node-local
    disks: a rank is paired if some machine holds its NPU dumps and some machine its bench dumps)."""
    if any(listing["single"][0] for listing in listings) and any(listing["single"][1] for listing in listings):
        return [("", os.path.join(npu_dir, "dump.json"), os.path.join(bench_dir, "dump.json"))]
    pairs = []
    for layer, bench_has, npu_labels, bench_labels in _merge_listings(listings):
        step_tag, npu_step, bench_step = f"_{layer}" if layer else "", _layer_dir(npu_dir, layer), \
            _layer_dir(bench_dir, layer)
        if not bench_has:
            raise CompareError(f"bench_path has no '{os.path.basename(bench_step)}' to compare with '{npu_step}'.")
        if not npu_labels:
            raise CompareError(f"no rank*/dump.json found under '{npu_step}'; give a dump.json, a step directory "
                               "or a dump root with step*/rank* directories.")
        for label in sorted(npu_labels):  # rank dir names differ by label only: the order of sorted(listdir)
            bench_label = _counterpart(label, npu_labels, bench_labels)
            if bench_label is None:
                logger.warning("%s of '%s' has no counterpart in '%s'; skipped.", rank_folder_name(label), npu_step,
                               bench_step)
                continue
            name, bench_name = rank_folder_name(label), rank_folder_name(bench_label)
            pair_name = f"{name}-{bench_name if label.startswith('proc') else name}"
            tag = f"{step_tag}_{pair_name}" if len(npu_labels) > 1 or label.isdigit() else step_tag
            pairs.append((tag, os.path.join(npu_step, name, "dump.json"), os.path.join(bench_step, bench_name,
                                                                                      "dump.json")))
    if not pairs:
        raise CompareError(f"no rank of '{npu_dir}' has a matching rank in '{bench_dir}'.")
    return pairs


def find_rank_pairs(npu_dir, bench_dir):
    """[(tag, npu dump.json, bench dump.json)] for a step dir (rank* inside) or a dump root (step*/rank*)."""
    return pair_rank_dirs(npu_dir, bench_dir, [list_rank_dirs(npu_dir, bench_dir)])
