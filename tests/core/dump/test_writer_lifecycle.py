"""The writer's lifecycle: stop() hands a step over without waiting for its files, one step in flight at most,
close() waits and leaves no exit callbacks, threads or collectors behind."""
import atexit
import gc
import os
import threading
import time
import weakref

import torch

from core_dump_helpers import check_tensor_files, dumped_step, make_collector
from msprobe.pytorch.dump.adapter import TorchAdapter


class GatedAdapter(TorchAdapter):
    """Writes tensor files only once `gate` is open: a disk far slower than the training step."""

    def __init__(self):
        super().__init__()
        self.gate = threading.Event()
        self.saved = 0

    def save_tensor(self, saved, path):
        self.gate.wait(timeout=5)
        super().save_tensor(saved, path)
        self.saved += 1


def test_stop_returns_while_the_steps_tensor_files_are_still_being_written(tmp_path):
    adapter = GatedAdapter()
    collector = make_collector(tmp_path, adapter=adapter)
    x, weight = torch.randn(3, 4), torch.randn(5, 4)
    dumped_step(collector, x, weight)  # stop() inside
    rank_dir = tmp_path / "step0" / "rank"
    started = time.perf_counter()
    collector.next_step()
    assert time.perf_counter() - started < 1.0
    assert adapter.saved == 0
    assert not (rank_dir / "dump.json").exists()  # a step's dump.json comes after its tensor files
    adapter.gate.set()
    collector.close()
    assert adapter.saved == 4  # x, weight, linear's output, relu's output; relu's input is a link
    assert len(check_tensor_files(rank_dir)) == 5


def test_handing_over_a_step_waits_while_the_previous_one_is_unwritten(tmp_path):
    adapter = GatedAdapter()
    collector = make_collector(tmp_path, adapter=adapter)
    x, weight = torch.randn(3, 4), torch.randn(5, 4)
    started = time.perf_counter()
    dumped_step(collector, x, weight)
    collector.next_step()
    assert time.perf_counter() - started < 1.0
    second = threading.Thread(target=dumped_step, args=(collector, x * 2, weight))
    second.start()
    second.join(0.5)
    assert second.is_alive()  # step 1's stop() waits for step 0's files: one step in flight at most
    adapter.gate.set()
    second.join(10)
    assert not second.is_alive()
    collector.close()
    for step in (0, 1):
        check_tensor_files(tmp_path / f"step{step}" / "rank")


def _writer_threads():
    return [t for t in threading.enumerate() if t.name.startswith(("msprobe-writer", "msprobe-tensor"))]


def test_closed_collectors_leave_no_exit_callbacks_threads_or_objects(tmp_path, monkeypatch):
    registered = []  # atexit._ncallbacks() does not go down on unregister: count the calls instead
    real_register, real_unregister = atexit.register, atexit.unregister

    def register(fn, *args, **kwargs):
        registered.append(fn)
        return real_register(fn, *args, **kwargs)

    def unregister(fn):
        registered[:] = [f for f in registered if f != fn]
        real_unregister(fn)

    monkeypatch.setattr(atexit, "register", register)
    monkeypatch.setattr(atexit, "unregister", unregister)
    threads = len(_writer_threads())
    refs = []
    for index in range(12):
        collector = make_collector(tmp_path / str(index))
        dumped_step(collector, torch.randn(2, 4), torch.randn(3, 4))
        collector.close()
        refs.append(weakref.ref(collector))
        refs.append(weakref.ref(collector.writer))
        del collector
    gc.collect()
    assert registered == []
    assert len(_writer_threads()) == threads
    # a callback still registered (a bound method) or a live writer thread would keep these alive
    assert [ref for ref in refs if ref() is not None] == []
    assert all(os.path.isfile(tmp_path / str(i) / "step0" / "rank" / "dump.json") for i in range(12))
