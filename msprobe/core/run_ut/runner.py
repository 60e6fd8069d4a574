"""Drive run_ut: cases -> framework executor (in this process or N worker processes) -> CSV writer.

The framework part is an *executor factory*, named as 'package.module:function' so worker processes
can import it: `factory(settings) -> execute(case) -> outcome dict` (see `ResultWriter.write`).
Outcomes are written in the order of dump.json whatever the number of workers, so run_ut, multi_run_ut
and a resumed run produce the same files. A worker that dies is an error, never a partial success.
"""
import importlib
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from msprobe.core.errors import MsprobeError
from msprobe.core.log import logger

__all__ = ["load_factory", "run_cases", "skip_outcome"]

_worker_execute = None


def load_factory(path):
    module_name, _, function = path.partition(":")
    return getattr(importlib.import_module(module_name), function)


def skip_outcome(case, reason, has_backward=None):
    """Outcome of an API that is not run: SKIP rows with the reason."""
    backward = case.backward is not None if has_backward is None else has_backward
    return {"api": case.name, "forward": "SKIP", "backward": "SKIP" if backward else "", "message": reason,
            "details": [{"name": f"{case.name}.forward", "status": "SKIP", "message": reason}]}


def _init_worker(factory_path, settings):
    global _worker_execute
    _worker_execute = load_factory(factory_path)(dict(settings, threads=1))


def _run_chunk(cases):
    return [_worker_execute(case) for case in cases]


def _progress(total, done_before):
    from tqdm import tqdm
    return tqdm(total=total, initial=done_before, unit="api", desc="run_ut", dynamic_ncols=True,
                disable=os.environ.get("MSPROBE_NO_PROGRESS") == "1")


def _start_method(factory_path):
    """How worker processes start: MSPROBE_RUN_UT_START if set, else the executor module's
    `WORKER_START_METHOD`, else 'fork' (workers reuse the parent's imported torch). MindSpore's runtime
    threads do not survive fork, so its executor asks for 'spawn'."""
    module = importlib.import_module(factory_path.partition(":")[0])
    wanted = os.environ.get("MSPROBE_RUN_UT_START") or getattr(module, "WORKER_START_METHOD", "fork")
    return wanted if wanted in multiprocessing.get_all_start_methods() else "spawn"


def _chunks(cases, size):
    return [cases[i:i + size] for i in range(0, len(cases), size)]


def run_cases(cases, writer, factory_path, settings, workers=1, skipped=()):
    """Check every case not yet in `writer.done`; `skipped` holds (case, reason) written as SKIP."""
    skip_reason = {case.name: reason for case, reason in skipped}
    ordered = sorted(list(cases) + [case for case, _ in skipped], key=lambda c: c.index)
    todo = [case for case in ordered if case.name not in writer.done]
    bar = _progress(len(ordered), len(ordered) - len(todo))
    try:
        if workers <= 1:
            execute = load_factory(factory_path)(settings) if any(c.name not in skip_reason for c in todo) else None
            for case in todo:
                writer.write(skip_outcome(case, skip_reason[case.name]) if case.name in skip_reason
                             else execute(case))
                bar.update(1)
        else:
            _run_parallel(todo, skip_reason, writer, factory_path, settings, workers, bar)
    finally:
        bar.close()
        writer.close()
    logger.info("run_ut: results in %s and %s", writer.result_path, writer.details_path)


def _run_parallel(todo, skip_reason, writer, factory_path, settings, workers, bar):
    runnable = [case for case in todo if case.name not in skip_reason]
    # small chunks keep the workers balanced (a few APIs, like the LM head, cost far more than others)
    chunks = _chunks(runnable, max(1, min(8, len(runnable) // (workers * 8) or 1)))
    context = multiprocessing.get_context(_start_method(factory_path))
    results, position = {}, 0
    try:
        with ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_init_worker,
                                 initargs=(factory_path, settings)) as pool:
            for outcomes in pool.map(_run_chunk, chunks):
                results.update((outcome["api"], outcome) for outcome in outcomes)
                position = _write_ready(todo, position, results, skip_reason, writer, bar)
    except BrokenProcessPool as exc:
        raise MsprobeError(f"a multi_run_ut worker process died ({exc}); results so far are in "
                           f"{writer.result_path}; resume with -csv_path after fixing the cause.") from None
    position = _write_ready(todo, position, results, skip_reason, writer, bar)
    if position != len(todo):
        raise MsprobeError(f"multi_run_ut: {len(todo) - position} APIs have no result; resume with -csv_path "
                           f"{writer.result_path}.")


def _write_ready(todo, position, results, skip_reason, writer, bar):
    """Write outcomes in dump.json order from `position` while the next one is available."""
    while position < len(todo):
        case = todo[position]
        if case.name in skip_reason:
            writer.write(skip_outcome(case, skip_reason[case.name]))
        elif case.name in results:
            writer.write(results.pop(case.name))
        else:
            break
        position += 1
        bar.update(1)
    return position
