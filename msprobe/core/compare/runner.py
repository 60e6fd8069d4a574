"""Compare entry point: one dump.json pair, or whole step*/rank* trees rank by rank (in parallel).

    from msprobe.core.compare import CompareOptions, compare_dumps
    outcomes = compare_dumps("npu/step0/rank0/dump.json", "gpu/step0/rank0/dump.json", "./out",
                             CompareOptions(fuzzy_match=True))
    outcomes[0].xlsx_path, outcomes[0].advisor_path, outcomes[0].result

One pair is compared by pair.py, ranks are paired by rank_pairs.py; this module runs the pairs (here in
processes, or on Ray by ray_engine.py) and writes the job's summary and first-divergence report.
"""
import os
import time
from dataclasses import replace

from msprobe.core.compare.first_divergence import report_pairs, report_records
from msprobe.core.compare.job_summary import job_summary, job_summary_text, write_job_summary
from msprobe.core.compare.pair import CompareOptions, compare_pair
from msprobe.core.compare.rank_pairs import find_rank_pairs
from msprobe.core.compare.templates import DumpTemplates
from msprobe.core.errors import CompareError
from msprobe.core.log import logger
from msprobe.core.paths import check_path, make_dir

__all__ = ["compare_dumps"]


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
