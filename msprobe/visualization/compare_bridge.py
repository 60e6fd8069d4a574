"""The one place where graph visualisation calls the compare flow: load dump tables, read tensor files,
compute statistics / tensor / md5 metrics for node pairs.

Graph and compare must agree on every number, so nodes get their rows and metrics from
`msprobe.core.io` (load) and `msprobe.core.compare` (metrics, tensor_pairs, mapping), never from a second
implementation.
Everything graph code needs from compare goes through the functions below.
"""
import os
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from msprobe.core.io.load import (MODE_MD5, MODE_STATISTICS, MODE_TENSOR, DumpTable, detect_mode,
                                       load_dump)
from msprobe.core.compare.metrics import TENSOR_METRIC_TABLE, statistics_diffs
from msprobe.core.compare.ms_to_pt import ms_to_pt_entry_mapper
from msprobe.core.compare.tensor_pairs import compare_tensor_files
from msprobe.core.errors import CompareError

__all__ = ["DumpTable", "load_table", "table_mode", "check_same_mode", "RowPair", "pair_metrics",
           "ms_to_pt_mapper", "rows_by_entry", "MODE_TENSOR", "MODE_STATISTICS", "MODE_MD5", "STAT_DIFF_KEYS",
           "STAT_RELATIVE_KEYS", "TENSOR_KEYS", "judge_pairs"]

STAT_DIFF_KEYS = ("Max diff", "Min diff", "Mean diff", "L2norm diff")
STAT_RELATIVE_KEYS = ("MaxRelativeErr", "MinRelativeErr", "MeanRelativeErr", "NormRelativeErr")
TENSOR_KEYS = tuple(m.header for m in TENSOR_METRIC_TABLE)
_NA = "N/A"
_INF = float("inf")


def load_table(dump_json: str) -> DumpTable:
    """The compare flow's columnar table of one dump.json (one row per tensor / scalar)."""
    return load_dump(dump_json)


def table_mode(table: DumpTable) -> str:
    """tensor / statistics / md5, decided exactly as compare decides it."""
    return detect_mode(table)


def check_same_mode(npu: DumpTable, bench: DumpTable) -> str:
    npu_mode, bench_mode = detect_mode(npu), detect_mode(bench)
    if npu_mode != bench_mode:
        raise CompareError(f"the NPU dump '{npu.path}' is a {npu_mode} dump but the bench dump '{bench.path}' "
                           f"is a {bench_mode} dump; dump both sides with the same task and summary_mode.")
    return npu_mode


@dataclass
class RowPair:
    """One NPU row compared with one bench row (indices into the two tables)."""
    npu_row: int
    bench_row: int


def _number(value) -> object:
    """A metric cell: text markers stay, NaN (not computed) becomes 'N/A', numbers become floats."""
    if isinstance(value, str):
        return value
    value = float(value)
    return _NA if value != value else value


def _statistics(npu: DumpTable, bench: DumpTable, pairs: Sequence[RowPair]) -> List[dict]:
    stats = ("max", "min", "mean", "norm")
    npu_index = np.fromiter((p.npu_row for p in pairs), dtype=np.int64, count=len(pairs))
    bench_index = np.fromiter((p.bench_row for p in pairs), dtype=np.int64, count=len(pairs))
    npu_stats = np.array([np.asarray(npu.columns[s], dtype=np.float64)[npu_index] for s in stats]).T
    bench_stats = np.array([np.asarray(bench.columns[s], dtype=np.float64)[bench_index] for s in stats]).T
    diff, relative = statistics_diffs(npu_stats.reshape(-1, 4), bench_stats.reshape(-1, 4))
    numeric = ("tensor", "scalar")
    kinds_n, kinds_b = npu.columns["kind"], bench.columns["kind"]
    out = []
    diff_list, rel_list = diff.tolist(), relative.tolist()
    # percentages rendered in one vectorised pass ('12.5%'; NaN -> 'N/A')
    percent = np.round(relative * 100, 6).tolist()
    for k, pair in enumerate(pairs):
        if kinds_n[pair.npu_row] not in numeric or kinds_b[pair.bench_row] not in numeric:
            out.append({key: _NA for key in STAT_DIFF_KEYS + STAT_RELATIVE_KEYS} | {"_relative": []})
            continue
        cells = {key: (_NA if value != value else value) for key, value in zip(STAT_DIFF_KEYS, diff_list[k])}
        for key, value in zip(STAT_RELATIVE_KEYS, percent[k]):
            cells[key] = _NA if value != value or value in (_INF, -_INF) else f"{value}%"
        cells["_relative"] = [v for v in rel_list[k] if v == v]
        out.append(cells)
    return out


def _tensors(npu: DumpTable, bench: DumpTable, pairs: Sequence[RowPair], processes: Optional[int]) -> List[dict]:
    out: List[dict] = [{} for _ in pairs]
    jobs, job_rows = [], []
    kinds_n, kinds_b = npu.columns["kind"], bench.columns["kind"]
    names_n, names_b = npu.columns["data_name"], bench.columns["data_name"]
    for k, pair in enumerate(pairs):
        i, j = pair.npu_row, pair.bench_row
        if kinds_n[i] != "tensor" or kinds_b[j] != "tensor" or names_n[i] == "-1":
            out[k] = {key: "unsupported" for key in TENSOR_KEYS}
            continue
        bench_file = os.path.join(bench.data_dir, names_b[j]) if names_b[j] != "-1" else ""
        jobs.append((os.path.join(npu.data_dir, names_n[i]), bench_file,
                     npu.columns["shape_key"][i], bench.columns["shape_key"][j]))
        job_rows.append(k)
    for k, metrics in zip(job_rows, compare_tensor_files(jobs, processes, progress=False)):
        out[k] = {key: _number(value) for key, value in zip(TENSOR_KEYS, metrics.values)}
    return out


def _md5(npu: DumpTable, bench: DumpTable, pairs: Sequence[RowPair]) -> List[dict]:
    md5_n, md5_b = npu.columns["md5"], bench.columns["md5"]
    return [{"Result": "pass" if md5_n[p.npu_row] == md5_b[p.bench_row] else "Different"} for p in pairs]


def _tensors_from_records(records, pairs: Sequence[RowPair]) -> List[dict]:
    """Tensor-mode cells of the pairs from records that already read the tensor files."""
    kinds_n, kinds_b = records.npu.columns["kind"], records.bench.columns["kind"]
    names_n = records.npu.columns["data_name"]
    fields = ("cosine", "max_abs", "max_rel", "one_thousandth", "five_thousandths")
    out = []
    for pair in pairs:
        i, j = pair.npu_row, pair.bench_row
        if kinds_n[i] != "tensor" or kinds_b[j] != "tensor" or names_n[i] == "-1":
            out.append({key: "unsupported" for key in TENSOR_KEYS})
        else:
            out.append({key: _number(records.metrics[name][i]) for key, name in zip(TENSOR_KEYS, fields)})
    return out


def pair_metrics(mode: str, npu: DumpTable, bench: DumpTable, pairs: Sequence[RowPair],
                 processes: Optional[int] = None, records=None) -> List[dict]:
    """Metric cells per row pair, keyed as the `.vis` format names them.

    statistics: the four diffs (floats or 'N/A') and four relative errors ('12.5%' or 'N/A'), plus
    `_relative` (the finite relative errors as fractions, for the precision index);
    tensor: Cosine, MaxAbsErr, MaxRelativeErr, One/Five Thousandth(s) Err Ratio (floats or markers);
    md5: Result ('pass' / 'Different').
    `records` (from judge_pairs over the same pairs) saves reading the tensor files a second time.
    """
    if not pairs:
        return []
    if mode == MODE_STATISTICS:
        return _statistics(npu, bench, pairs)
    if mode == MODE_TENSOR:
        if records is not None:
            return _tensors_from_records(records, pairs)
        return _tensors(npu, bench, pairs, processes)
    return _md5(npu, bench, pairs)


def judge_pairs(mode: str, npu: DumpTable, bench: DumpTable, pairs: Sequence[RowPair],
                processes: Optional[int] = None, fuzzy: bool = False):
    """Compare's CompareRecords (dtype-aware judgement per row, and the advisor's suspect in
    `records.suspect`) with the rows of matched nodes paired as the graph paired them.

    Rows no matched node holds (parameter gradients, rows of nodes the graph could not match) are
    paired as compare pairs them, so the judgement and the suspect are those of `msprobe compare`
    on the same two dumps. One record row per NPU row: record row i is NPU table row i; bench rows no
    pair took follow (a call only the bench side made is a structural difference, advisor.py).
    """
    from msprobe.core.compare.across_steps import judge_step
    from msprobe.core.compare.advisor import find_suspect
    from msprobe.core.io.load import load_dump
    from msprobe.core.compare.match import match_rows
    from msprobe.core.compare.records import build_records
    from msprobe.core.compare.pair import CompareOptions, compare_tables

    paired = np.full(len(npu), -1, dtype=np.int64)
    for pair in pairs:
        paired[pair.npu_row] = pair.bench_row
    covered = paired >= 0
    used = set(paired[covered].tolist())
    by_name, _ = match_rows(npu, bench, fuzzy)
    for i in np.flatnonzero(~covered & (by_name >= 0)).tolist():
        j = int(by_name[i])
        if j not in used:
            paired[i] = j
            used.add(j)
    options = CompareOptions(progress=False, processes=processes, fuzzy_match=fuzzy)
    taken = np.zeros(len(bench), dtype=bool)
    taken[paired[paired >= 0]] = True
    records = build_records(mode, npu, bench, paired, np.flatnonzero(~taken), options)
    records.suspect = find_suspect(records)
    # step N judged against step N-1's update where both sides dumped it, as `msprobe compare` judges it
    records.suspect = judge_step(records, lambda npu_json, bench_json: compare_tables(
        load_dump(npu_json), load_dump(bench_json), options))
    return records


def ms_to_pt_mapper() -> Callable[[str], str]:
    """MindSpore -> PyTorch entry names (Cell. -> Module., Mint.add -> Torch.add), as cross-framework
    compare maps them."""
    return ms_to_pt_entry_mapper(api_defaults=True, cells_to_modules=True)


def rows_by_entry(table: DumpTable) -> Dict[str, List[int]]:
    """entry name -> its row indices, in dump order."""
    rows: Dict[str, List[int]] = {}
    for index, entry in enumerate(table.columns["entry"]):
        rows.setdefault(entry, []).append(index)
    return rows

