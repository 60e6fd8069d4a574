"""Dump writer: a step's tensor files, then its JSON files, under step{N}/rank{R}, off the training thread.

The training thread collects a step's work in a batch (tensor snapshots to save, names to link, the JSON
objects) and hands it over when the step's JSON is ready (`write_json`, i.e. at stop()). One background
thread takes the batches in order: it prepares the rank folders, writes the tensor files through a small
thread pool, links the duplicates, then writes the JSON files as one set (json_files.py). With orjson the
JSON text is encoded on the training thread when the step is handed over (~2 ms for a step of 800 records, one
pass, no GIL contention), and the background thread only writes bytes; without it the objects go to the JSON
helper process (json_helper.py). Encoding in the background cost more than it saved: on a machine whose cores
run the framework's threads (torch starts one per core), a second encoder takes CPU from them: torch's own ops
ran 2-3x slower in a small Llama's dumped steps on a 2-core machine while the previous step's files were being
encoded, and the whole step ~12 % slower. Hence:

- stop() and step() return at once: a step's files are written while the next step runs;
- at most one step is in flight: handing over step k first waits until step k-1 is on disk (bounded memory);
- a step's dump.json appears only after its tensor files: a crash never leaves a dump.json naming a
  file that was not written;
- `drain()` (close(), interpreter exit) waits for everything; `close()` also ends the threads.

A tensor file is always a new inode (the old name is unlinked first): a tensor seen twice in a step is
written once and hard-linked, so writing through an existing name could change the other name's bytes.
A rank folder this writer writes holds only this run's files: the earlier run's JSON files and tensor
files in it are removed when this run first writes there (folders of other steps and ranks are kept).
Write failures (a full disk) never reach training: the first failure of each kind in a step is logged,
the others counted, and `report()` says what was not written by the batches already finished (a batch
still being written is reported whole by a later report, never in pieces).
"""
import os
import queue
import shutil
import threading

from msprobe.core.dump import json_files
from msprobe.core.dump.json_files import encode_dump_bytes, encode_dump_json, remove_file, write_json_files
from msprobe.core.dump.json_helper import json_helper
from msprobe.core.log import logger
from msprobe.core.paths import DIR_MODE, FILE_MODE
from msprobe.core.write_failures import WriteFailures

__all__ = ["DumpWriter", "WriteFailures", "rank_dir_name", "encode_dump_json", "write_json_files", "TENSOR_DIR"]

TENSOR_DIR = "dump_tensor_data"
_STACK_TEXTS = 4096  # list texts kept for stack.json (a model has a few hundred call sites)
JSON_NAMES = ("dump.json", "stack.json", "construct.json", "debug.json")


def rank_dir_name(rank):
    """'rank' for a single process, 'rank{R}' when distributed."""
    return "rank" if rank is None else f"rank{rank}"


class _Batch:
    """What one hand-over asks to write: tensor saves, links, JSON sets, and the rank folders they touch."""
    __slots__ = ("saves", "links", "json", "folders", "done")

    def __init__(self):
        self.saves = []    # (step, path, snapshot)
        self.links = []    # (step, source path, target path)
        self.json = []     # (step, rank folder, [(name, bytes)] or {name: object}, {name: path to link} or None)
        self.folders = {}  # rank folder -> whether it needs dump_tensor_data/
        self.done = threading.Event()

    def __bool__(self):
        return bool(self.saves or self.links or self.json)


class DumpWriter:
    """Writes one rank's dump under `dump_path`; `save_tensor_fn(snapshot, path)` writes one tensor file."""

    TENSOR_THREADS = 2

    def __init__(self, dump_path, save_tensor_fn):
        self.dump_path = dump_path
        self.save_tensor_fn = save_tensor_fn
        self.failures = WriteFailures("msprobe dump writer")
        self._batch = _Batch()
        self._in_flight = None
        self._queue = queue.Queue()
        self._thread = None
        self._pool = None
        self._prepared = set()  # rank folders this writer has written into (writer thread only)
        self._warned_earlier_run = False
        self._stack_texts = {}  # stack.json's list texts across steps (json_files.encode_dump_bytes' `lists`)
        self._last_stacks = None  # (the last stack.json handed over, its text, its path): the next one may link to it

    # -- paths ------------------------------------------------------------------------------
    def rank_dir(self, step, rank):
        return os.path.join(self.dump_path, f"step{step}", rank_dir_name(rank))

    def tensor_dir(self, step, rank):
        return os.path.join(self.rank_dir(step, rank), TENSOR_DIR)

    # -- the training thread's side ---------------------------------------------------------
    def save_tensor(self, step, rank, snapshot, file_name):
        """Write `snapshot` as dump_tensor_data/`file_name` with the step's next hand-over."""
        folder = self.rank_dir(step, rank)
        self._batch.folders[folder] = True
        self._batch.saves.append((step, os.path.join(folder, TENSOR_DIR, file_name), snapshot))

    def link_tensor(self, step, rank, source_name, file_name):
        """The same tensor content under a second name: a hard link (a copy where links fail)."""
        folder = self.rank_dir(step, rank)
        self._batch.folders[folder] = True
        directory = os.path.join(folder, TENSOR_DIR)
        self._batch.links.append((step, os.path.join(directory, source_name), os.path.join(directory, file_name)))

    def write_json(self, step, rank, files, finite=()):
        """Hand the batch over, ending with `files` ({'dump.json': obj, ...}; never mutated afterwards), encoded
        here when orjson is there. finite: names of files whose "data" holds no NaN or infinity (json_files)."""
        folder = self.rank_dir(step, rank)
        self._batch.folders.setdefault(folder, False)
        if len(self._stack_texts) > _STACK_TEXTS:  # bounded: a run with ever new call sites starts it afresh
            self._stack_texts = {}
        # a training loop makes the same calls step after step: a stack.json equal to the last one is that file again,
        # hard-linked by the writer thread (not encoded, not written: ~0.75 MB a step for a small Llama)
        stacks, last, links, path = files.get("stack.json"), self._last_stacks, None, os.path.join(folder, "stack.json")
        known = None
        if last is not None and stacks is not None and last[2] != path and stacks == last[0]:
            known = {"stack.json": last[1]}
        encoded = _encoded(files, self._stack_texts, known, finite)
        if type(encoded) is list and stacks is not None:
            if known is not None:
                links = {"stack.json": last[2]}
            self._last_stacks = (stacks, next(text for name, text in encoded if name == "stack.json"), path)
        self._batch.json.append((step, folder, encoded, links))
        self.commit()

    def commit(self):
        """Hand what was collected to the writer thread; waits only while the previous batch is unwritten."""
        batch = self._batch
        if not batch:
            return
        self._batch = _Batch()
        if self._in_flight is not None:
            self._in_flight.done.wait()  # at most one step in flight: bounded memory, ordered files
        self._in_flight = batch
        if self._start():
            self._queue.put(batch)
        else:  # no new threads at interpreter shutdown: write here
            self._process(batch)

    release_tensors = commit  # the former name

    def drain(self):
        """Block until everything handed over (and anything still collected) is written."""
        self.commit()
        if self._in_flight is not None:
            self._in_flight.done.wait()

    def report(self):
        """Log what could not be written since the last report; the line, or None."""
        return self.failures.report()

    def close(self):
        """Write everything, then end the writer thread and the tensor pool (a later write restarts them)."""
        self.drain()
        thread, self._thread = self._thread, None
        if thread is not None and thread.is_alive():
            self._queue.put(None)
            thread.join()
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)

    # -- the writer thread ------------------------------------------------------------------
    def _start(self):
        if self._thread is not None and self._thread.is_alive():
            return True
        thread = threading.Thread(target=_serve, args=(self._queue, self._process), name="msprobe-writer",
                                  daemon=True)
        try:
            thread.start()
        except RuntimeError:
            return False
        self._thread = thread
        return True

    def _process(self, batch):
        try:
            for folder, with_tensors in batch.folders.items():
                self._prepare(folder, with_tensors)
            failed = self._write_tensors(batch.saves)
            for step, source, target in batch.links:
                try:
                    if source in failed:
                        raise failed[source]
                    _link(source, target)
                except OSError as exc:
                    self.failures.record(step, "tensor files", exc, target)
            for step, folder, files, links in batch.json:
                try:
                    if type(files) is list:  # [(name, bytes)]: encoded when handed over
                        write_json_files(folder, files, links=links)
                    elif not json_helper().write(folder, files):
                        write_json_files(folder, files.items())
                except Exception as exc:  # noqa: BLE001 - a failed write must not stop training
                    self.failures.record(step, "JSON file sets", exc, folder)
        except Exception as exc:  # noqa: BLE001 - e.g. a folder that cannot be made: everything of the batch
            step = batch.json[0][0] if batch.json else (batch.saves or batch.links)[0][0]
            self.failures.record(step, "dump folders", exc, self.dump_path)
        finally:
            batch.saves = batch.links = batch.json = None  # the snapshots go now
            self.failures.settle()  # before done: a report after waiting for this batch sees all of it
            batch.done.set()

    def _prepare(self, folder, with_tensors):
        if folder in self._prepared:
            if with_tensors:
                _make_dirs(os.path.join(folder, TENSOR_DIR))
            return
        self._prepared.add(folder)
        if _remove_earlier_run(folder) and not self._warned_earlier_run:
            self._warned_earlier_run = True
            logger.warning(f"msprobe: {self.dump_path} holds an earlier dump; the step folders this run writes are "
                           "replaced, the others are kept as they are.")
        _make_dirs(os.path.join(folder, TENSOR_DIR) if with_tensors else folder)

    def _write_tensors(self, saves):
        """Write the tensor files (in the pool); {path: error} of those that failed."""
        if not saves:
            return {}
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(self.TENSOR_THREADS, thread_name_prefix="msprobe-tensor")
        futures = []
        try:
            for save in saves:
                futures.append(self._pool.submit(self._save, *save))
        except RuntimeError:  # interpreter shutdown: the pool takes no more work, write the rest here
            inline = [self._save(*save) for save in saves[len(futures):]]
        else:
            inline = []
        results = [future.result() for future in futures] + inline
        return {path: error for (_, path, _), error in zip(saves, results) if error is not None}

    def _save(self, step, path, snapshot):
        try:
            remove_file(path)  # a new inode: the old name may share its bytes with another (hard link)
            self.save_tensor_fn(snapshot, path)
            os.chmod(path, FILE_MODE)
            return None
        except Exception as exc:  # noqa: BLE001 - counted and reported; training goes on
            self.failures.record(step, "tensor files", exc, path)
            try:
                remove_file(path)  # no partial file under a name dump.json gives
            except OSError:
                pass
            return exc if isinstance(exc, OSError) else OSError(str(exc))


def _encoded(files, stack_texts, known=None, finite=()):
    """[(name, JSON bytes)] of `files` when orjson encodes them (~7x faster than the json module), else `files`
    itself for the background thread (a value that cannot be encoded, too: its failure is recorded there).
    stack_texts: the writer's texts of stack.json's lists (the collector's stack cache hands out the same list
    for every call from one code location, step after step, and never changes it). known: {name: bytes} of files
    whose text is known already. finite: names of files whose "data" holds no NaN or infinity."""
    if json_files.orjson is None:
        return files
    known = known or {}
    try:
        return [(name, known[name] if name in known else
                 encode_dump_bytes(obj, lists=stack_texts if name == "stack.json" else None, finite=name in finite))
                for name, obj in files.items()]
    except Exception:  # noqa: BLE001 - e.g. a lone surrogate in a name: the writer thread records the failure
        return files


def _serve(jobs, process):
    while True:
        batch = jobs.get()
        if batch is None:
            return
        process(batch)


def _remove_earlier_run(folder):
    """Remove an earlier run's dump files from a rank folder; whether there were any."""
    found = False
    for name in JSON_NAMES:
        try:
            os.unlink(os.path.join(folder, name))
            found = True
        except FileNotFoundError:
            pass
    try:
        entries = list(os.scandir(os.path.join(folder, TENSOR_DIR)))
    except (FileNotFoundError, NotADirectoryError):
        return found
    for entry in entries:
        if not entry.is_dir(follow_symlinks=False):
            os.unlink(entry.path)
            found = True
    return found


def _make_dirs(path):
    """Create `path` and its missing parents, each with DIR_MODE whatever the umask."""
    if os.path.isdir(path):
        return
    parent = os.path.dirname(path)
    if parent and parent != path:
        _make_dirs(parent)
    try:
        os.mkdir(path, DIR_MODE)
    except FileExistsError:
        if not os.path.isdir(path):
            raise
        return
    os.chmod(path, DIR_MODE)


def _link(source, target):
    remove_file(target)
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)
        os.chmod(target, FILE_MODE)
