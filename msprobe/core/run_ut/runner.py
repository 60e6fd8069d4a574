"""Drive run_ut: cases -> framework executor (in this process or N worker processes) -> CSV writer.

The framework part is an *executor factory*, named as 'package.module:function' so worker processes
can import it: `factory(settings) -> execute(case) -> outcome dict` (see `ResultWriter.write`).
Outcomes are written in the order of dump.json whatever the number of workers, so run_ut, multi_run_ut
and a resumed run produce the same files. A worker that dies is an error, never a partial success.

With workers (`WorkerPool`) the parent never imports the executor module (nor, through it, torch or
mindspore): the workers import it in parallel, while the parent reads dump.json; then the parent only
hands out chunks of cases and writes the CSVs.
"""
import importlib
import multiprocessing
import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from msprobe.core.errors import MsprobeError, UnsupportedError
from msprobe.core.log import logger
from msprobe.core.run_ut.verdict_table import print_api_verdicts

__all__ = ["load_factory", "run_cases", "skip_outcome", "run_or_skip", "device_plan", "WorkerPool",
           "keep_freed_memory"]

_worker: dict = {}  # in a worker process: its factory, device id, and the executor built for the current settings


def load_factory(path):
    module_name, _, function = path.partition(":")
    return getattr(importlib.import_module(module_name), function)


def skip_outcome(case, reason, has_backward=None):
    """Outcome of an API that is not run: SKIP rows with the reason."""
    backward = case.backward is not None if has_backward is None else has_backward
    return {"api": case.name, "forward": "SKIP", "backward": "SKIP" if backward else "", "message": reason,
            "details": [{"name": f"{case.name}.forward", "status": "SKIP", "message": reason}]}


def run_or_skip(run_case, case, settings):
    """run_case(case, settings), or SKIP rows with the reason when the API cannot run here (unsupported
    argument, no kernel for the dtype on this device, ...): never a crash of the whole run."""
    try:
        return run_case(case, settings)
    except UnsupportedError as exc:
        reason = str(exc)
    except Exception as exc:  # noqa: BLE001 - any failure of one API is that API's SKIP row
        lines = str(exc).strip().splitlines()
        reason = f"run failed: {type(exc).__name__}: {lines[0] if lines else ''}"
        logger.debug("%s: %s", case.name, reason)
    return skip_outcome(case, reason)


def device_plan(device_ids, workers):
    """Device id of each worker: workers spread evenly over the devices, in turn (docs 07 §3.2)."""
    device_ids = list(device_ids or [0])
    return [device_ids[index % len(device_ids)] for index in range(workers)]


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt parameters of glibc


def keep_freed_memory(mmap_threshold=256 << 20, trim_threshold=1 << 30):
    """Let glibc reuse freed memory instead of giving it back to the kernel: every API allocates and
    frees the same large arrays again, and fresh pages cost a fault each (run_ut on the GPT benchmark
    dump: 386,000 faults and 5.6 s before, 111,000 and 5.05 s after, 6 % more peak memory). A no-op
    where glibc's mallopt is not available."""
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, mmap_threshold)) and bool(mallopt(_M_TRIM_THRESHOLD, trim_threshold))


def _exit_with_parent(parent_pid, interval=0.5):
    """A worker whose parent was killed (SIGKILL, the OOM killer) would wait for work forever, holding its
    memory: it leaves as soon as it is re-parented."""
    def watch():
        while os.getppid() == parent_pid:
            time.sleep(interval)
        os._exit(1)
    threading.Thread(target=watch, name="msprobe-parent-watch", daemon=True).start()


def _init_worker(factory_path, device_queue, parent_pid):
    _exit_with_parent(parent_pid)
    keep_freed_memory()
    _worker.update(factory=load_factory(factory_path), device_id=device_queue.get(), settings=None)


def _ready():
    return os.getpid()


def _run_chunk(settings_and_cases):
    settings, cases = settings_and_cases
    if _worker["settings"] != settings:
        _worker["execute"] = _worker["factory"](dict(settings, device_id=_worker["device_id"], threads=1))
        _worker["settings"] = settings
    return [_worker["execute"](case) for case in cases]


class WorkerPool:
    """multi_run_ut worker processes. They start at once and import the executor (and its framework)
    while the parent is still reading dump.json; `device_ids` are shared out among them in turn.
    `start_method`: 'fork', or 'spawn' for frameworks whose runtime does not survive fork (env
    MSPROBE_RUN_UT_START overrides it)."""

    def __init__(self, factory_path, workers, start_method="fork", device_ids=(0,)):
        method = os.environ.get("MSPROBE_RUN_UT_START") or start_method
        if method not in multiprocessing.get_all_start_methods():
            method = "spawn"
        if method == "fork":
            import numpy  # noqa: F401 - every executor needs it: imported once here, not once per worker
        context = multiprocessing.get_context(method)
        device_queue = context.SimpleQueue()
        for device_id in device_plan(device_ids, workers):
            device_queue.put(device_id)
        self.workers = workers
        self._pool = ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_init_worker,
                                         initargs=(factory_path, device_queue, os.getpid()))
        for _ in range(workers):  # processes start on submit, not before
            self._pool.submit(_ready)

    def map(self, settings, chunks):
        """Outcome lists of the chunks, in order."""
        return self._pool.map(_run_chunk, [(settings, chunk) for chunk in chunks])

    def close(self):
        self._pool.shutdown(wait=True, cancel_futures=True)


def _progress(total, done_before):
    from tqdm import tqdm
    return tqdm(total=total, initial=done_before, unit="api", desc="run_ut", dynamic_ncols=True,
                disable=os.environ.get("MSPROBE_NO_PROGRESS") == "1")


def _chunks(cases, size):
    return [cases[i:i + size] for i in range(0, len(cases), size)]


def run_cases(cases, writer, factory_path, settings, skipped=(), pool=None, device_id=0):
    """Check every case not yet in `writer.done`, in this process or, given a WorkerPool, in its workers;
    `skipped` holds (case, reason) written as SKIP rows."""
    skip_reason = {case.name: reason for case, reason in skipped}
    ordered = sorted(list(cases) + [case for case, _ in skipped], key=lambda c: c.index)
    todo = [case for case in ordered if case.name not in writer.done]
    runnable = [case for case in todo if case.name not in skip_reason]
    bar = _progress(len(ordered), len(ordered) - len(todo))
    try:
        if pool is None:
            keep_freed_memory()
            execute = load_factory(factory_path)(dict(settings, device_id=device_id)) if runnable else None
            for case in todo:
                writer.write(skip_outcome(case, skip_reason[case.name]) if case.name in skip_reason
                             else execute(case))
                bar.update(1)
        else:
            _run_parallel(todo, runnable, skip_reason, writer, settings, pool, bar)
    finally:
        bar.close()
        writer.close()
    logger.info("run_ut: %s; results in %s and %s", writer.summary(), writer.result_path, writer.details_path)
    print_api_verdicts("run_ut", writer.statuses, writer.messages)


def _run_parallel(todo, runnable, skip_reason, writer, settings, pool, bar):
    # small chunks keep the workers balanced (a few APIs, like the LM head, cost far more than others)
    chunks = _chunks(runnable, max(1, min(8, len(runnable) // (pool.workers * 8) or 1)))
    results, position = {}, 0
    try:
        for outcomes in pool.map(settings, chunks):
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
