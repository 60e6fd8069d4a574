"""Worker processes that check calls off the training thread, fed through one bounded queue.

Each worker is a fresh interpreter with two private pipes. One sender thread per worker takes calls from
the shared queue, so a slow worker does not hold the others; `submit` blocks when the queue is full,
which bounds memory. A worker that dies loses only the calls sent to it: they are counted, and the
training process never sees an exception.
"""
import os
import queue
import subprocess
import sys
import threading
from multiprocessing.connection import Connection
from typing import Callable, Dict, List

from msprobe.core.log import logger
from msprobe.pytorch.online_dispatch.op_call import OpCall, decode_message, encode_call

__all__ = ["WorkerPool"]

_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


class _Worker:
    def __init__(self, number: int, bench_dtype: str, dump_dir: str, dump_failed: bool):
        calls_read, calls_write = os.pipe()
        results_read, results_write = os.pipe()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH")) if p)
        command = [sys.executable, "-m", "msprobe.pytorch.online_dispatch.worker", str(calls_read),
                   str(results_write), bench_dtype, dump_dir or "", "1" if dump_failed else "0"]
        try:
            self.process = subprocess.Popen(command, pass_fds=(calls_read, results_write), env=env,
                                            stdin=subprocess.DEVNULL)
        finally:
            os.close(calls_read)
            os.close(results_write)
        self.number = number
        self.calls = Connection(calls_write, readable=False)
        self.results = Connection(results_read, writable=False)
        self.alive = True


class WorkerPool:
    """`submit(call)` from the training thread; `close()` returns every outcome received."""

    def __init__(self, process_num: int, bench_dtype: str, dump_dir: str, dump_failed: bool,
                 on_outcome: Callable[[Dict], None], queue_size: int = 0):
        self._on_outcome = on_outcome
        self._queue: "queue.Queue" = queue.Queue(maxsize=queue_size or 4 * process_num)
        self._outcomes: List[Dict] = []
        self._lock = threading.Lock()
        self.submitted = 0
        self._workers = [_Worker(i, bench_dtype, dump_dir, dump_failed) for i in range(process_num)]
        self._threads = []
        for worker in self._workers:
            for target in (self._send_loop, self._receive_loop):
                thread = threading.Thread(target=target, args=(worker,), daemon=True,
                                          name=f"msprobe-dispatch-{target.__name__[1:5]}-{worker.number}")
                thread.start()
                self._threads.append(thread)

    def submit(self, call: OpCall) -> None:
        self.submitted += 1
        self._queue.put(call)

    def _send_loop(self, worker: _Worker) -> None:
        while True:
            call = self._queue.get()
            if call is None:
                break
            if not worker.alive:
                continue
            try:
                worker.calls.send_bytes(encode_call(call))
            except (OSError, ValueError) as exc:  # broken pipe: the worker is gone
                worker.alive = False
                logger.warning("online_dispatch: worker %d stopped (%s); calls sent to it are not checked.",
                               worker.number, exc)
        try:
            worker.calls.send_bytes(b"")
        except (OSError, ValueError):
            pass
        worker.calls.close()

    def _receive_loop(self, worker: _Worker) -> None:
        while True:
            try:
                data = worker.results.recv_bytes()
            except (EOFError, OSError):
                break
            outcome = decode_message(data)
            with self._lock:
                self._outcomes.append(outcome)
            self._on_outcome(outcome)
        worker.results.close()

    def close(self, timeout: float = 600.0) -> List[Dict]:
        """Wait until every queued call is checked; returns the outcomes (any order). Calls lost with a
        dead worker are `submitted - len(outcomes)`."""
        for _ in self._workers:
            self._queue.put(None)
        for thread in self._threads:
            thread.join(timeout)
        for worker in self._workers:
            try:
                worker.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                worker.process.kill()
                worker.process.wait()
        with self._lock:
            return list(self._outcomes)
