"""One compare pair: CompareOptions, compare_tables (in memory), compare_pair / compare_loaded (the xlsx report,
advisor and summary of one NPU dump.json against one bench dump.json) and the CompareOutcome they return.

    from msprobe.core.compare import CompareOptions, compare_pair
    outcome = compare_pair("npu/step0/rank0/dump.json", "gpu/step0/rank0/dump.json", "./out", CompareOptions())
    outcome.xlsx_path, outcome.advisor_path, outcome.result
"""
import os
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from msprobe.core.compare.across_steps import judge_step
from msprobe.core.compare.advisor import find_suspect, write_advisor
from msprobe.core.compare.job_summary import pair_summary, step_rank_of
from msprobe.core.compare.mapping import NameMapper, load_mapping_file
from msprobe.core.compare.match import match_rows
from msprobe.core.compare.memo import memoized, structure_memo
from msprobe.core.compare.records import CompareRecords, build_records
from msprobe.core.compare.render import SUSPICION, print_suspicious_rows, render_result, summary_text
from msprobe.core.dump.session import HookSession, fewer_collections
from msprobe.core.errors import CompareError
from msprobe.core.io.load import MODE_MD5, DumpTable, detect_mode, load_dump, load_stack, same_layout_pair
from msprobe.core.io.xlsx import Sheet, write_xlsx
from msprobe.core.log import logger
from msprobe.core.paths import check_path

__all__ = ["CompareOptions", "CompareOutcome", "compare_tables", "compare_pair", "compare_loaded", "build_mapper"]


@dataclass
class CompareOptions:
    """Everything that changes how a compare runs. Mapping fields take a dict/list or a YAML path."""
    stack_mode: bool = False
    stack_path: Optional[str] = None
    auto_analyze: bool = True
    fuzzy_match: bool = False
    diff_only: bool = False  # keep only rows that fail or are highlighted
    data_mapping: object = None
    api_mapping: object = None
    cell_mapping: object = None
    layer_mapping: object = None
    entry_mapper: Optional[Callable[[str], str]] = None  # framework adapter hook (e.g. MindSpore -> PyTorch)
    processes: Optional[int] = None  # None: all cores
    progress: bool = True
    is_print_compare_log: bool = True
    timestamp: Optional[str] = None
    engine: str = "local"  # directories: "local" (processes here) or "ray" (tasks on a Ray cluster)
    address: Optional[str] = None  # Ray cluster address for engine "ray" (None: RAY_ADDRESS or "auto")
    layout: object = None  # NPU side sharded over ranks: a layout file path or dict (layout.py)
    extra: dict = field(default_factory=dict)


@dataclass
class CompareOutcome:
    """What one compare wrote: the report, the advisor file (None with -c or md5), the report table
    (`result`, a render.CompareResult) and the records (both None for every pair of a many-pair compare), and
    `summary` (job_summary.pair_summary: counts and suspect, kept for every pair)."""
    xlsx_path: str
    advisor_path: Optional[str]
    result: object
    records: Optional[CompareRecords] = None
    summary: Optional[dict] = None


def _mapping(value, what):
    if isinstance(value, str):
        return load_mapping_file(check_path(value, kind="file", what=what), what)
    return value


def build_mapper(options):
    return NameMapper(_mapping(options.data_mapping, "data_mapping file"),
                      _mapping(options.api_mapping, "api_mapping file"),
                      _mapping(options.cell_mapping, "cell_mapping file"),
                      _mapping(options.layer_mapping, "layer_mapping file"), options.entry_mapper)


def _stack_for(npu_json, options, templates=None):
    """(stacks, show column?): an explicit stack_path obeys -s; otherwise stack.json is auto-detected."""
    if options.stack_path:
        path = check_path(options.stack_path, kind="file", what="stack_path", allow_symlink=True)
        return (load_stack(path), True) if options.stack_mode else ({}, False)
    beside = os.path.join(os.path.dirname(npu_json), "stack.json")
    if os.path.isfile(beside):
        return (load_stack(beside) if templates is None else templates.stacks(beside, load_stack)), True
    return {}, False


def _check_modes(npu, bench):
    npu_mode, bench_mode = detect_mode(npu), detect_mode(bench)
    if npu_mode != bench_mode:
        raise CompareError(f"the NPU dump '{npu.path}' is in {npu_mode} mode but the bench dump '{bench.path}' "
                           f"is in {bench_mode} mode; dump both sides with the same task and summary_mode.")
    return npu_mode


def _keep_diff_rows(result):
    """Only rows that fail, warn, differ, are highlighted or carry a Suspicion (diff_only)."""
    keep = result.color > 0
    for column, bad in (("Accuracy Reached or Not", ("No", "Unmatched")), ("Result", ("Warning", "Different", "N/A"))):
        if column in result.columns:
            keep |= np.isin(np.array(result.columns[column], dtype=object), bad)
    if SUSPICION in result.columns:
        keep |= np.array([cell is not None and not cell.startswith("within") for cell in result.columns[SUSPICION]])
    index = np.flatnonzero(keep)
    result.columns = {k: [v[i] for i in index] for k, v in result.columns.items()}
    result.color = result.color[index]
    if result.row_styles is not None:
        result.row_styles = result.row_styles[index]
    return result


def compare_tables(npu: DumpTable, bench: DumpTable, options: Optional[CompareOptions] = None) -> CompareRecords:
    """Compare two loaded dumps in memory and return their CompareRecords (numbers, reason codes,
    verdicts, the dtype-aware judgement and the advisor's suspect); nothing is written.

    Tables come from `msprobe.core.io.load.load_dump(path)` or, for data that never was a
    dump.json file, `table_from_dump(dump_dict, path, data_dir)`. Example:

        from msprobe.core.compare import CompareOptions, compare_tables
        from msprobe.core.io.load import load_dump
        from msprobe.core.compare.render import render_result, suspicion_text

        records = compare_tables(load_dump("npu/step0/rank0/dump.json"),
                                 load_dump("gpu/step0/rank0/dump.json"), CompareOptions(progress=False))
        if records.suspect is not None:
            print(records.suspect.name, records.suspect.summary)
        suspicious = records.judgement.suspicious          # bool per row, dtype-aware
        row_names = records.names                          # one per row, NPU rows first
        table = render_result(records)                     # the report's cells, if wanted

    Raises CompareError when the two dumps hold different modes (statistics, tensor, md5).
    """
    options = options or CompareOptions(progress=False)
    npu, bench = same_layout_pair(npu, bench)
    mode = _check_modes(npu, bench)
    bench_index, unmatched = memoized(structure_memo(npu, bench, mode, options), "match",
                                      lambda: match_rows(npu, bench, options.fuzzy_match, build_mapper(options)))
    records = build_records(mode, npu, bench, bench_index, unmatched, options)
    records.suspect = find_suspect(records)
    # step N's differences against step N-1's update, where both sides dumped it (across_steps.py)
    records.suspect = judge_step(records, lambda npu_json, bench_json: compare_tables(
        load_dump(npu_json), load_dump(bench_json), options))
    return records


_PARALLEL_LOAD_BYTES = 8 * 2 ** 20


def _load_both(npu_json, bench_json, options, templates=None):
    """Both dumps. Big ones are parsed in two forked helper processes at the same time: faster, and
    the parsed JSON trees (several times the file size) never fragment this process's memory."""
    cores = options.processes or os.cpu_count() or 1
    if cores < 2 or min(os.path.getsize(npu_json), os.path.getsize(bench_json)) < _PARALLEL_LOAD_BYTES:
        return load_dump(npu_json, templates), load_dump(bench_json, templates)
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("fork")) as pool:
        npu_future, bench_future = pool.submit(load_dump, npu_json), pool.submit(load_dump, bench_json)
        return npu_future.result(), bench_future.result()


_PAIR_YOUNG_THRESHOLD = 100_000


def compare_pair(npu_json, bench_json, output_dir, options, name_tag="", templates=None):
    """Compare one NPU dump.json with one bench dump.json; writes the xlsx (and advisor). A tuple of NPU
    dump.json files is one group of a sharded run, recombined by options.layout (layout.py). `templates`
    (templates.DumpTemplates): what the pairs of one job share, kept from pair to pair.

    A pair allocates some 200k containers (two parsed dumps, their tables, the report's cells) that
    form no cycles; at gc's default threshold they cost about 20 young and a few full collections, a
    sixth of the pair's time: the threshold is raised while the pair runs."""
    session = HookSession()
    fewer_collections(session, _PAIR_YOUNG_THRESHOLD)
    try:
        return _compare_pair(npu_json, bench_json, output_dir, options, name_tag, templates)
    finally:
        session.close()


def _compare_pair(npu_json, bench_json, output_dir, options, name_tag, templates):
    if isinstance(npu_json, tuple):
        from msprobe.core.compare.layout import load_group

        npu, bench = load_group(npu_json, options.layout), load_dump(bench_json)
        return compare_loaded(npu, bench, output_dir, options, name_tag, place=step_rank_of(bench_json))
    npu, bench = _load_both(npu_json, bench_json, options, templates)
    return compare_loaded(npu, bench, output_dir, options, name_tag, templates=templates)


def compare_loaded(npu, bench, output_dir, options, name_tag="", place=None, templates=None):
    """compare_tables, then the xlsx report, the advisor file and the terminal summary."""
    start = time.time()
    records = compare_tables(npu, bench, options)
    stacks, with_stack = _stack_for(npu.path, options, templates)
    result = render_result(records, stacks, with_stack)
    suspicion = result.columns.get(SUSPICION) or [""] * len(records)  # every row's: diff_only drops rows
    if options.diff_only:
        result = _keep_diff_rows(result)
    timestamp = options.timestamp or time.strftime("%Y%m%d%H%M%S")
    xlsx_path = os.path.join(output_dir, f"compare_result{name_tag}_{timestamp}.xlsx")
    write_xlsx(xlsx_path, [Sheet("Sheet", result.header, [result.columns[h] for h in result.header],
                                 result.row_styles, freeze_header=True)])
    logger.debug("compare took %.2fs", time.time() - start)
    advisor_path = None
    if options.auto_analyze and records.mode != MODE_MD5:
        advisor_path, text = write_advisor(records, os.path.join(output_dir, f"advisor{name_tag}_{timestamp}.txt"))
        if options.is_print_compare_log:
            logger.info("advisor:\n%s", text.rstrip())
    logger.info("%s", summary_text(records, xlsx_path))
    if options.is_print_compare_log:
        print_suspicious_rows(records, suspicion)
    summary = pair_summary(records, *(place or step_rank_of(npu.path)), report=xlsx_path)
    return CompareOutcome(xlsx_path, advisor_path, result, records, summary)
