"""Compare entry point: one dump.json pair, or whole step*/rank* trees rank by rank (in parallel).

    from msprobe.core.compare import CompareOptions, compare_dumps
    outcomes = compare_dumps("npu/step0/rank0/dump.json", "gpu/step0/rank0/dump.json", "./out",
                             CompareOptions(fuzzy_match=True))
    outcomes[0].xlsx_path, outcomes[0].advisor_path, outcomes[0].result
"""
import os
import time
from dataclasses import dataclass, field, replace
from typing import Callable, Optional

import numpy as np

from msprobe.core.compare.across_steps import judge_step
from msprobe.core.compare.advisor import find_suspect, write_advisor
from msprobe.core.compare.first_divergence import report_pairs, report_records
from msprobe.core.compare.job_summary import job_summary, job_summary_text, pair_summary, step_rank_of, write_job_summary
from msprobe.core.compare.mapping import NameMapper, load_mapping_file
from msprobe.core.compare.match import match_rows
from msprobe.core.compare.memo import memoized, structure_memo
from msprobe.core.compare.records import CompareRecords, build_records
from msprobe.core.compare.render import SUSPICION, print_suspicious_rows, render_result, summary_text
from msprobe.core.compare.templates import DumpTemplates
from msprobe.core.dump.session import HookSession, fewer_collections
from msprobe.core.dump_paths import folder_number, rank_folder_name, rank_label
from msprobe.core.errors import CompareError
from msprobe.core.io.load import MODE_MD5, DumpTable, detect_mode, load_dump, load_stack, same_layout_pair
from msprobe.core.io.xlsx import Sheet, write_xlsx
from msprobe.core.log import logger
from msprobe.core.paths import check_path, make_dir

__all__ = ["CompareOptions", "CompareOutcome", "compare_dumps", "compare_pair", "compare_tables", "find_rank_pairs",
           "list_rank_dirs", "pair_rank_dirs"]



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


_PENDING_JOBS: list = []  # filled just before forking workers, so options with callables need no pickling
_WORKER_TEMPLATES: list = []  # a pool worker's DumpTemplates, made at its first pair


def _run_one(index):
    tag, npu_json, bench_json, output_dir, options = _PENDING_JOBS[index]
    if not _WORKER_TEMPLATES:
        _WORKER_TEMPLATES.append(DumpTemplates())
    outcome = compare_pair(npu_json, bench_json, output_dir, options, tag, _WORKER_TEMPLATES[0])
    outcome.result = outcome.records = None  # results stay in the worker; the files are the output
    return outcome


def compare_dumps(npu_path, bench_path, output_dir, options=None):
    """Compare NPU and bench dumps (files or directories); returns a list of CompareOutcome. Directories also get
    job_summary.json (job_summary.py); fingerprint dumps (summary_mode xor / md5) first_divergence.json
    (first_divergence.py)."""
    options = options or CompareOptions()
    npu_path = check_path(npu_path, what="npu_path", allow_symlink=True)
    bench_path = check_path(bench_path, what="bench_path", allow_symlink=True)
    output_dir = make_dir(output_dir, what="output_path")
    if os.path.isfile(npu_path) != os.path.isfile(bench_path):
        raise CompareError("npu_path and bench_path must both be dump.json files or both be directories.")
    if os.path.isfile(npu_path) and options.layout:
        raise CompareError("--layout needs the sharded run's step directory or dump root as npu_path.")
    if os.path.isfile(npu_path):
        outcomes = [compare_pair(npu_path, bench_path, output_dir, options)]
        report_pairs([(npu_path, bench_path)], output_dir)
        return outcomes
    if options.layout:
        from msprobe.core.compare.layout import load_layout

        options = replace(options, layout=load_layout(options.layout))  # read once, before workers fork
    options = replace(options, timestamp=options.timestamp or time.strftime("%Y%m%d%H%M%S"))
    if options.engine == "ray" and not options.layout:  # the nodes list the ranks: some may be on their disks only
        from msprobe.core.compare.ray_engine import compare_tree_on_ray

        outcomes, divergences = compare_tree_on_ray(npu_path, bench_path, output_dir, _no_stack_path(options))
    else:
        pairs = _layout_pairs(npu_path, bench_path, options) if options.layout else find_rank_pairs(npu_path,
                                                                                                    bench_path)
        outcomes = _compare_pairs(pairs, output_dir, _no_stack_path(options))
    job = job_summary(outcome.summary for outcome in outcomes)
    path = write_job_summary(job, output_dir)
    logger.info("%s\n  job summary: %s", job_summary_text(job), path)
    if options.engine == "ray" and not options.layout:
        if divergences and divergences[0] is not None:  # as report_pairs: the first pair's dumps decide
            report_records([record for record in divergences if record is not None], output_dir)
    elif not options.layout:
        report_pairs([(n, b) for _, n, b in pairs], output_dir)
    return outcomes


def _layout_pairs(npu_path, bench_path, options):
    from msprobe.core.compare.layout import layout_pairs

    if options.engine == "ray":
        raise CompareError("--layout runs on the local engine only (not yet with --engine ray).")
    return layout_pairs(npu_path, bench_path, options.layout)


def _no_stack_path(options):
    if options.stack_path:
        logger.warning("stack_path is ignored when comparing directories; each rank's stack.json is used.")
        options = replace(options, stack_path=None)
    return options


def _compare_pairs(pairs, output_dir, options):
    """Every (tag, npu, bench) pair compared here; worker processes keep only each pair's small summary."""
    if len(pairs) == 1:
        tag, npu_json, bench_json = pairs[0]
        return [compare_pair(npu_json, bench_json, output_dir, options, tag)]
    processes = min(len(pairs), options.processes or os.cpu_count() or 1)
    if processes <= 1:
        templates = DumpTemplates()
        return [_drop_tables(compare_pair(n, b, output_dir, options, t, templates)) for t, n, b in pairs]
    import multiprocessing

    from tqdm import tqdm

    worker_options = replace(options, processes=1, progress=False)
    _PENDING_JOBS[:] = [(t, n, b, output_dir, worker_options) for t, n, b in pairs]
    try:
        with multiprocessing.get_context("fork").Pool(processes) as pool:
            # pairs sent a few at a time on big jobs: fewer messages for this process to handle between them
            chunk = max(1, min(4, len(pairs) // (processes * 32)))
            return list(tqdm(pool.imap(_run_one, range(len(pairs)), chunksize=chunk), total=len(pairs),
                             desc="compare ranks", unit="rank", disable=not options.progress))
    finally:
        _PENDING_JOBS.clear()


def _drop_tables(outcome):
    """Memory stays flat over many pairs: the files and the summary are the output."""
    outcome.result = outcome.records = None
    return outcome
