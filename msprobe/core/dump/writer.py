"""Dump writer: dump.json, stack.json, construct.json and tensor files per step{N}/rank{R}.

All file work runs off the training thread, which only hands over finished Python objects: JSON
files through one background thread, which passes them to a helper process for encoding (see
json_helper.py), tensor files through a small thread pool. Jobs run in order, so a step's tensor files are on disk before
its dump.json. Every JSON file is written atomically (temp file + rename): a reader never sees half
a file, even if the process dies. `drain()` waits for the queue; it runs at step end when
async_dump is off, and always at interpreter exit.
"""
import atexit
import json
import os
import queue
import shutil
import threading
import time

from msprobe.core.dump.json_helper import json_helper
from msprobe.core.log import logger
from msprobe.core.paths import DIR_MODE, FILE_MODE, atomic_write_text

__all__ = ["DumpWriter", "rank_dir_name", "encode_dump_json", "write_json_files"]

TENSOR_DIR = "dump_tensor_data"


try:  # ~7x faster than the json module; optional
    import orjson
except ImportError:
    orjson = None

_compact = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def _encode(value):
    """Compact JSON text of one value. orjson writes NaN and Infinity as null (the json module writes
    NaN, Infinity, -Infinity, as the reference's files hold them), so any output holding a null is
    encoded again by the json module: a few percent of a dump's entries."""
    if orjson is not None:
        try:
            text = orjson.dumps(value)
        except TypeError:  # a value orjson does not take (e.g. an int over 64 bits)
            return _compact(value)
        if b"null" not in text:
            return text.decode("utf-8")
    return _compact(value)
_YIELD_EVERY = 32  # entries encoded between two GIL hand-offs to the training thread


def _entries(mapping, indent, share_gil):
    pad = " " * indent
    memo = {}  # stack.json: every call from one code location shares one list object
    lines = []
    for count, (key, value) in enumerate(mapping.items(), 1):
        if type(value) is list:
            text = memo.get(id(value))
            if text is None:
                text = memo[id(value)] = _encode(value)
        else:
            text = _encode(value)
        lines.append(f"{pad}{_compact(str(key))}: {text}")
        if share_gil and not count % _YIELD_EVERY:
            # the C encoder never releases the GIL; without this the training thread, which releases
            # it in every torch op, waits a whole switch interval (5 ms) to get it back each time
            time.sleep(0)
    return "{\n" + ",\n".join(lines) + "\n" + pad[:-1] + "}" if lines else "{}"


def encode_dump_json(obj, share_gil=True):
    """JSON text with one entry per line: top-level keys, and every entry of "data" (or of a flat
    mapping such as stack.json) on its own line, each entry compact. Same content as indent=1, but
    encoded by the C encoder (indent=1 forces the pure-Python one, ~4x slower, holding the GIL).
    share_gil: hand the GIL over every few entries (in a training process; the helper needs not:
    each hand-over costs a system call)."""
    if not isinstance(obj, dict):
        return _compact(obj)
    if "data" in obj and isinstance(obj["data"], dict):
        lines = [f" {_compact(key)}: {_entries(value, 2, share_gil) if key == 'data' else _compact(value)}"
                 for key, value in obj.items()]
        return "{\n" + ",\n".join(lines) + "\n}"
    return _entries(obj, 1, share_gil)


def rank_dir_name(rank):
    """'rank' for a single process, 'rank{R}' when distributed."""
    return "rank" if rank is None else f"rank{rank}"


class _SaveJob:
    """One tensor file being written; names that share its content are linked once it exists."""
    __slots__ = ("path", "snapshot", "links", "done", "lock")

    def __init__(self, path, snapshot):
        self.path, self.snapshot = path, snapshot
        self.links = []
        self.done = False
        self.lock = threading.Lock()


class DumpWriter:
    """Writes one rank's dump under `dump_path`; `save_tensor_fn(snapshot, path)` saves tensors.

    JSON files go through one ordered thread; tensor files through a small pool (file creation is
    system-call bound and releases the GIL, so a few threads overlap it with training).
    """

    TENSOR_THREADS = 2

    def __init__(self, dump_path, save_tensor_fn):
        self.dump_path = dump_path
        self.save_tensor_fn = save_tensor_fn
        self._queue = queue.Queue()
        self._thread = None
        self._pool = None
        self._futures = []
        self._held = []
        self._jobs = {}
        self._lock = threading.Lock()
        self._made_dirs = set()
        self.errors = []
        atexit.register(self.drain)

    # -- paths ------------------------------------------------------------------------------
    def rank_dir(self, step, rank):
        return os.path.join(self.dump_path, f"step{step}", rank_dir_name(rank))

    def tensor_dir(self, step, rank):
        return os.path.join(self.rank_dir(step, rank), TENSOR_DIR)

    def _ensure_dir(self, path):
        if path not in self._made_dirs:
            os.makedirs(path, mode=DIR_MODE, exist_ok=True)
            self._made_dirs.add(path)

    # -- jobs -------------------------------------------------------------------------------
    def _start(self):
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._work, name="msprobe-writer", daemon=True)
                self._thread.start()

    def _work(self):
        while True:
            job = self._queue.get()
            try:
                job[0](*job[1:])
            except Exception as exc:  # a failed write must not kill training; report it
                self._report(exc)
            finally:
                self._queue.task_done()

    def _report(self, exc):
        self.errors.append(f"{exc}")
        logger.error(f"msprobe dump writer: {exc}")

    def submit(self, fn, *args):
        self._start()
        self._queue.put((fn, *args))

    def _submit_tensor(self, fn, *args):
        # held back until release_tensors(): on a small machine, writer threads running while the
        # step computes slow down the framework's own worker threads far more than they save
        self._held.append((fn, args))

    def release_tensors(self):
        """Start writing the tensor files collected so far (called at the end of a step)."""
        held, self._held = self._held, []
        if not held:
            return
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(self.TENSOR_THREADS, thread_name_prefix="msprobe-tensor")
        for position, (fn, args) in enumerate(held):
            try:
                self._futures.append(self._pool.submit(self._guarded, fn, *args))
            except RuntimeError:  # interpreter shutdown: no new threads, write them here
                for late_fn, late_args in held[position:]:
                    self._guarded(late_fn, *late_args)
                return

    def _guarded(self, fn, *args):
        try:
            fn(*args)
        except Exception as exc:
            self._report(exc)

    def drain(self):
        """Block until every queued job is done."""
        self.release_tensors()
        futures, self._futures = self._futures, []
        for future in futures:
            future.result()
        self._jobs = {}
        if self._thread is not None:
            self._queue.join()

    # -- public writes ----------------------------------------------------------------------
    def save_tensor(self, step, rank, snapshot, file_name):
        directory = self.tensor_dir(step, rank)
        self._ensure_dir(directory)
        job = _SaveJob(os.path.join(directory, file_name), snapshot)
        self._jobs[(directory, file_name)] = job
        self._submit_tensor(self._run_save, job)

    def link_tensor(self, step, rank, source_name, file_name):
        """The same tensor content under a second name: a hard link (copy where links fail)."""
        directory = self.tensor_dir(step, rank)
        target = os.path.join(directory, file_name)
        job = self._jobs.get((directory, source_name))
        if job is not None:
            with job.lock:
                if not job.done:
                    job.links.append(target)
                    return
            self._submit_tensor(_link, job.path, target)
        else:
            self._submit_tensor(_link, os.path.join(directory, source_name), target)

    def write_json(self, step, rank, files):
        """files: {'dump.json': obj, 'stack.json': obj, ...}; obj must not be mutated afterwards."""
        self.submit(self._write_json, self.rank_dir(step, rank), files)

    def _run_save(self, job):
        self.save_tensor_fn(job.snapshot, job.path)
        os.chmod(job.path, FILE_MODE)
        job.snapshot = None
        with job.lock:
            job.done = True
            links, job.links = job.links, []
        for target in links:
            _link(job.path, target)

    def _write_json(self, directory, files):
        self._ensure_dir(directory)
        if not json_helper().write(directory, files):
            write_json_files(directory, files.items())


def write_json_files(directory, files, share_gil=True):
    """Encode and atomically write each (name, object) of `files` into `directory`."""
    for name, obj in files:
        atomic_write_text(os.path.join(directory, name), encode_dump_json(obj, share_gil))


def _link(source, target):
    if os.path.exists(target):
        os.remove(target)
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)
        os.chmod(target, FILE_MODE)
