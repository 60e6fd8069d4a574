"""Different parallel layouts: recombine the statistics of a sharded (tensor-parallel) run into one logical rank.

    layout = load_layout("layout.yaml")
    table = recombine_tables([load_dump(r0), load_dump(r1)], layout)   # one DumpTable, as if run unsharded
    pairs = layout_pairs("tp_dump", "single_dump", layout)             # [(tag, (npu jsons...), bench json)]

A layout file (YAML or JSON) says how the run under test (the NPU side) is sharded:

    groups: [[0, 1]]          # optional: ranks that hold one model replica, in shard order; group g is
                              # compared with bench rank g (default: every rank of the step, one group)
    tensors:                  # row-name patterns (fnmatch: * ? [..]), first match wins
      "Functional.linear.0.forward.input.1": Shard(0)       # split along dim 0 over the group's ranks
      "Functional.linear.0.forward.output.0": Shard(-1)
      "Functional.linear.1.forward.output.0": Partial       # each rank holds a summand (before all_reduce)
      "*": Replicate                                        # the default: every rank holds all of it

Placements are DTensor's words. Recombined statistics: Shard(d) concatenates the shapes along d; Max is the
largest Max, Min the smallest Min, Norm = sqrt(sum Norm_i^2), Mean = sum(Mean_i n_i) / sum(n_i). Partial
sums the shards elementwise: Mean = sum(Mean_i); Max, Min and Norm cannot be recombined and are left out
(shown N/A, not judged). Replicate takes the group's first rank; rows it calls replicated whose ranks
disagree are named in a warning (a rank-local difference the comparison of rank 0 cannot see).
Only statistics dumps can be recombined (tensor files and md5 fingerprints of shards are not the whole).

`auto` instead of a file: the placements the PyTorch dump recorded for DTensors (layout.json beside each
rank's dump.json, written by core/dump/record.py's layout_mirror), groups from the recorded meshes. A
recorded layout.json is read with a layout file too: its exact row names come before the file's patterns.
"""
import fnmatch
import math
import os
import re
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from msprobe.core.errors import CompareError, ConfigError
from msprobe.core.io.load import MODE_STATISTICS, DumpTable, detect_mode, load_dump, table_from_dump
from msprobe.core.log import logger

__all__ = ["Placement", "Layout", "load_layout", "parse_placement", "recombine_tables", "load_group",
           "layout_pairs", "recorded_placements", "recorded_groups", "REPLICATE", "AUTO"]

_PLACEMENT = re.compile(r"^\s*(shard|replicate|partial)\s*(?:\(\s*(-?\d+)?\s*\))?\s*$", re.IGNORECASE)
_NAN = float("nan")
_ALL_ABSENT = 15
AUTO = "auto"  # --layout auto: placements and groups recorded by the dump (layout.json, DTensors)
RECORDED = "layout.json"
_NOT_SUMMABLE = 1 | 2 | 8  # Max, Min, Norm of a partial sum


@dataclass(frozen=True)
class Placement:
    """How one tensor lies over a group's ranks: kind 'shard' (along dim), 'replicate' or 'partial'."""
    kind: str
    dim: Optional[int] = None


REPLICATE = Placement("replicate")


def parse_placement(text) -> Placement:
    """`Shard(d)`, `Replicate` or `Partial` (DTensor's names; case and empty parentheses do not matter)."""
    match = _PLACEMENT.match(str(text))
    if match is None or (match.group(1).lower() == "shard") != (match.group(2) is not None):
        raise ConfigError(f"layout: placement '{text}' is not Shard(dim), Replicate or Partial.")
    kind = match.group(1).lower()
    return Placement(kind, int(match.group(2)) if kind == "shard" else None)


UNFIT = Placement("unfit")  # a recorded placement layouts cannot recombine (Partial(max), a 2-D mesh)


@dataclass
class Layout:
    """Groups of ranks (None: all ranks of a step, one group, or the recorded meshes) and (pattern, placement)
    rules in order; `recorded` (row name -> placement, read from the dump's layout.json) comes first."""
    rules: List[Tuple[str, Placement]]
    groups: Optional[List[List[int]]] = None
    auto: bool = False  # `--layout auto`: no rules of the user's; the dump's layout.json is required
    recorded: Optional[dict] = None

    def __post_init__(self):
        self._compiled = [(re.compile(fnmatch.translate(pattern)), placement) for pattern, placement in self.rules]

    def placement_of(self, row_name: str) -> Placement:
        if self.recorded:
            hit = self.recorded.get(row_name)
            if hit is not None:
                return hit
        for regex, placement in self._compiled:
            if regex.match(row_name):
                return placement
        return REPLICATE


def load_layout(source) -> Layout:
    """A Layout from a YAML/JSON file path or an already parsed dict (see the module docstring)."""
    if isinstance(source, Layout):
        return source
    if isinstance(source, str) and source == AUTO:
        return Layout([], auto=True)
    if isinstance(source, str):
        from msprobe.core.paths import check_path, load_yaml

        source = load_yaml(check_path(source, kind="file", what="layout file"), what="layout file")
    if not isinstance(source, dict) or not isinstance(source.get("tensors", {}), dict):
        raise ConfigError("layout: expected a mapping with 'tensors' (row-name pattern: placement) "
                          "and optionally 'groups' (lists of ranks).")
    rules = [(str(pattern), parse_placement(text)) for pattern, text in (source.get("tensors") or {}).items()]
    groups = source.get("groups")
    if groups is not None:
        if (not isinstance(groups, list) or not groups
                or not all(isinstance(g, list) and g and all(type(r) is int and r >= 0 for r in g) for g in groups)):
            raise ConfigError("layout: 'groups' must be a non-empty list of non-empty lists of rank numbers.")
        flat = [rank for group in groups for rank in group]
        if len(flat) != len(set(flat)):
            raise ConfigError("layout: a rank appears in more than one group.")
    return Layout(rules, groups)


def _shard_shape(shapes, dim):
    """The whole tensor's shape from its shards' shapes (None when they cannot be concatenated along dim)."""
    first = shapes[0]
    if first is None or not first or not -len(first) <= dim < len(first):
        return None
    axis = dim % len(first)
    if any(s is None or len(s) != len(first) or s[:axis] + s[axis + 1:] != first[:axis] + first[axis + 1:]
           for s in shapes):
        return None
    return first[:axis] + (sum(s[axis] for s in shapes),) + first[axis + 1:]


def _recombined(placement, values, shapes, absent):
    """(shape, max, min, mean, norm, absent bits) of the whole tensor from its shards' statistics."""
    highs, lows, means, norms = zip(*values)
    absent_any = 0
    for bits in absent:
        absent_any |= bits
    if placement.kind == "partial":
        if any(s != shapes[0] for s in shapes):
            return None
        return shapes[0], _NAN, _NAN, math.fsum(means), _NAN, absent_any | _NOT_SUMMABLE
    shape = _shard_shape(shapes, placement.dim)
    if shape is None:
        return None
    counts = [math.prod(s) for s in shapes]
    total = sum(counts)
    mean = math.fsum(m * n for m, n in zip(means, counts)) / total if total else _NAN
    return (shape, max(highs, key=_nan_first), min(lows, key=_nan_last), mean,
            math.sqrt(math.fsum(n * n for n in norms)), absent_any)


def _nan_first(value):  # a NaN shard makes the whole Max NaN (the tensor holds a NaN)
    return math.inf if value != value else value


def _nan_last(value):
    return -math.inf if value != value else value


def _same(a, b):
    return a == b or (a != a and b != b)


def recombine_tables(tables: Sequence[DumpTable], layout: Layout) -> DumpTable:
    """One DumpTable holding the whole tensors' statistics of a group's rank tables (shards in order)."""
    for table in tables:
        if detect_mode(table) != MODE_STATISTICS:
            raise CompareError(f"--layout recombines statistics dumps only; '{table.path}' is a "
                               f"{detect_mode(table)} dump.")
    first = tables[0]
    merged = DumpTable(first.path, dict(first.header), None)
    merged.entries = list(first.entries)
    merged.columns = {key: list(values) for key, values in first.columns.items()}
    cols = merged.columns
    indexes = [{name: i for i, name in enumerate(t.columns["name"])} for t in tables[1:]]
    missing, unfit, differing = [], [], []
    for row, name in enumerate(cols["name"]):
        if cols["kind"][row] != "tensor" and cols["kind"][row] != "scalar":
            continue
        rows = [row] + [index.get(name) for index in indexes]
        if any(r is None for r in rows):
            missing.append(name)
            continue
        placement = layout.placement_of(name) if cols["kind"][row] == "tensor" else REPLICATE
        stats = [tuple(t.columns[k][r] for k in ("max", "min", "mean", "norm")) for t, r in zip(tables, rows)]
        if placement is UNFIT:
            unfit.append(f"{name} (recorded placement not recombinable)")
            cols["max"][row] = cols["min"][row] = cols["mean"][row] = cols["norm"][row] = _NAN
            cols["absent"][row] = _ALL_ABSENT
            continue
        if placement.kind == "replicate":
            if any(not all(map(_same, stats[0], other)) for other in stats[1:]):
                differing.append(name)
            continue
        shapes = [t.columns["shape_key"][r] for t, r in zip(tables, rows)]
        whole = _recombined(placement, stats, shapes, [t.columns["absent"][r] for t, r in zip(tables, rows)])
        if whole is None:
            unfit.append(f"{name} {[list(s or ()) for s in shapes]}")
            whole = (shapes[0], _NAN, _NAN, _NAN, _NAN, _ALL_ABSENT)
        shape, cols["max"][row], cols["min"][row], cols["mean"][row], cols["norm"][row], cols["absent"][row] = whole
        cols["shape_key"][row], cols["shape"][row] = shape, str(list(shape or ()))
    _warn(first.path, len(tables), missing, unfit, differing)
    return merged


def _warn(path, ranks, missing, unfit, differing):
    where = os.path.dirname(path)
    if missing:
        logger.warning("layout: %d row(s) of '%s' are missing on another rank of its group and keep the first "
                       "rank's statistics, e.g. %s", len(missing), where, missing[0])
    if unfit:
        logger.warning("layout: %d row(s) of '%s' do not fit their placement over %d ranks (not compared), e.g. %s",
                       len(unfit), where, ranks, unfit[0])
    if differing:
        logger.warning("layout: %d row(s) the layout calls replicated differ between the ranks of '%s' (the first "
                       "rank's are compared), e.g. %s", len(differing), where, differing[0])


def load_group(npu_jsons: Sequence[str], layout) -> DumpTable:
    """The recombined table of one group's dump.json files (shard order); placements the dump recorded
    (layout.json beside the first rank's dump.json) come before the layout's own rules."""
    layout = load_layout(layout)
    recorded = recorded_placements(os.path.join(os.path.dirname(npu_jsons[0]), RECORDED))
    if recorded is None and layout.auto:
        raise CompareError(f"--layout auto: no {RECORDED} beside '{npu_jsons[0]}' (the dump records one for "
                           "DTensors only); give a layout file.")
    if recorded is not None:
        layout = Layout(layout.rules, layout.groups, layout.auto, recorded)
    return recombine_tables([load_dump(path) for path in npu_jsons], layout)


def _recorded_placement(text):
    try:
        return parse_placement(text)
    except ConfigError:
        return UNFIT


def recorded_placements(path) -> Optional[dict]:
    """Row name -> Placement of a dump's layout.json (None without the file). Its 'data' mirrors dump.json's
    nesting, so dump.json's row naming (load.table_from_dump) names its rows; other leaves are null."""
    if not os.path.isfile(path):
        return None
    raw = _read_recorded(path)
    table = table_from_dump(raw, path)
    cols = table.columns
    return {name: _recorded_placement(value) for name, kind, value in zip(cols["name"], cols["kind"], cols["value"])
            if kind == "text"}


def _read_recorded(path):
    import json

    try:
        with open(path, encoding="utf-8") as handle:
            raw = json.load(handle)
    except (OSError, ValueError) as error:
        raise CompareError(f"layout: cannot read '{path}': {error}") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("data"), dict):
        raise CompareError(f"layout: '{path}' is not a msprobe layout.json.")
    return raw


def recorded_groups(rank_jsons) -> Optional[List[List[int]]]:
    """The distinct meshes the ranks' layout.json files name, ordered by their first rank (None: no file)."""
    meshes = set()
    for path in rank_jsons:
        recorded = os.path.join(os.path.dirname(path), RECORDED)
        if os.path.isfile(recorded):
            for mesh in _read_recorded(recorded).get("meshes") or ():
                if isinstance(mesh, list) and mesh and all(type(r) is int for r in mesh):
                    meshes.add(tuple(mesh))
    return [list(mesh) for mesh in sorted(meshes)] or None


def _rank_jsons(step_dir):
    found = {}
    for name in os.listdir(step_dir):
        match = re.match(r"^rank(\d*)$", name)  # "rank": a dump made without a process group
        path = os.path.join(step_dir, name, "dump.json")
        if match and os.path.isfile(path):
            found[int(match.group(1) or 0)] = path
    return found


def layout_pairs(npu_dir, bench_dir, layout) -> list:
    """[(tag, (npu dump.json of each rank of group g), bench rank g's dump.json)] for step dirs or dump roots."""
    layout = load_layout(layout)
    steps = sorted((d for d in os.listdir(npu_dir) if re.match(r"^step\d+$", d)), key=lambda d: int(d[4:]))
    layers = [(f"_{s}", os.path.join(npu_dir, s), os.path.join(bench_dir, s)) for s in steps] or [("", npu_dir, bench_dir)]
    pairs = []
    for step_tag, npu_step, bench_step in layers:
        npu_ranks = _rank_jsons(npu_step)
        bench_ranks = _rank_jsons(bench_step) if os.path.isdir(bench_step) else {}
        if not npu_ranks:
            raise CompareError(f"--layout: no rank*/dump.json under '{npu_step}'.")
        groups = layout.groups or recorded_groups(npu_ranks.values()) or [sorted(npu_ranks)]
        for number, group in enumerate(groups):
            absent = [rank for rank in group if rank not in npu_ranks]
            if absent:
                raise CompareError(f"--layout: '{npu_step}' has no rank{absent[0]} of group {group}.")
            if number not in bench_ranks:
                raise CompareError(f"--layout: group {number} ({group}) has no bench rank{number} under "
                                   f"'{bench_step}'.")
            tag = f"{step_tag}_rank{'+'.join(map(str, group))}-rank{number}"
            pairs.append((tag, tuple(npu_ranks[rank] for rank in group), bench_ranks[number]))
    return pairs
