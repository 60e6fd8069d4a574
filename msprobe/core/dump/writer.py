"""Dump writer: dump.json, stack.json, construct.json and tensor files per step{N}/rank{R}.

All file work runs on one background thread (JSON encoding included) so the training thread only
hands over finished Python objects. Jobs run in order, so a step's tensor files are on disk before
its dump.json. Every JSON file is written atomically (temp file + rename): a reader never sees half
a file, even if the process dies. `drain()` waits for the queue; it runs at step end when
async_dump is off, and always at interpreter exit.
"""
import atexit
import os
import queue
import shutil
import threading

from msprobe.core.log import logger
from msprobe.core.paths import DIR_MODE, FILE_MODE, atomic_write_json

__all__ = ["DumpWriter", "rank_dir_name"]

TENSOR_DIR = "dump_tensor_data"


def rank_dir_name(rank):
    """'rank' for a single process, 'rank{R}' when distributed."""
    return "rank" if rank is None else f"rank{rank}"


class DumpWriter:
    """Writes one rank's dump under `dump_path`; `save_tensor_fn(snapshot, path)` saves tensors."""

    def __init__(self, dump_path, save_tensor_fn):
        self.dump_path = dump_path
        self.save_tensor_fn = save_tensor_fn
        self._queue = queue.Queue()
        self._thread = None
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
                self.errors.append(f"{exc}")
                logger.error(f"msprobe dump writer: {exc}")
            finally:
                self._queue.task_done()

    def submit(self, fn, *args):
        self._start()
        self._queue.put((fn, *args))

    def drain(self):
        """Block until every queued job is done."""
        if self._thread is not None:
            self._queue.join()

    # -- public writes ----------------------------------------------------------------------
    def save_tensor(self, step, rank, snapshot, file_name):
        self.submit(self._save_tensor, self.tensor_dir(step, rank), snapshot, file_name)

    def link_tensor(self, step, rank, source_name, file_name):
        """The same tensor content under a second name: a hard link (copy where links fail)."""
        self.submit(self._link_tensor, self.tensor_dir(step, rank), source_name, file_name)

    def write_json(self, step, rank, files):
        """files: {'dump.json': obj, 'stack.json': obj, ...}; obj must not be mutated afterwards."""
        self.submit(self._write_json, self.rank_dir(step, rank), files)

    def _save_tensor(self, directory, snapshot, file_name):
        self._ensure_dir(directory)
        path = os.path.join(directory, file_name)
        self.save_tensor_fn(snapshot, path)
        os.chmod(path, FILE_MODE)

    def _link_tensor(self, directory, source_name, file_name):
        source, target = os.path.join(directory, source_name), os.path.join(directory, file_name)
        if os.path.exists(target):
            os.remove(target)
        try:
            os.link(source, target)
        except OSError:
            shutil.copyfile(source, target)
            os.chmod(target, FILE_MODE)

    def _write_json(self, directory, files):
        self._ensure_dir(directory)
        for name, obj in files.items():
            atomic_write_json(os.path.join(directory, name), obj)
