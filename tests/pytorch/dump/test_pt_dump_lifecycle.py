"""One hook lifecycle: stop() (or a failed install) leaves torch exactly as it was; collect() is
start/stop as a with block; a failing statistic at L2 or in a collective never reaches training."""
import gc
import types
import weakref

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn

from msprobe.pytorch import PrecisionDebugger
from pt_dump_helpers import MLP, TinyTransformer, load_rank, train, write_config

_MODULE_HOOK_DICTS = ("_forward_pre_hooks", "_forward_pre_hooks_with_kwargs", "_forward_hooks",
                      "_forward_hooks_with_kwargs", "_forward_hooks_always_called", "_backward_hooks",
                      "_backward_pre_hooks", "_state_dict_hooks", "_load_state_dict_pre_hooks")
_GLOBAL_MODULE_HOOKS = ("_global_forward_pre_hooks", "_global_forward_hooks", "_global_backward_hooks",
                        "_global_backward_pre_hooks", "_global_forward_hooks_always_called")


def _functions_of(namespace):
    # submodules are left out: torch imports some of them lazily while training runs
    return {name: value for name, value in vars(namespace).items() if not isinstance(value, types.ModuleType)}


def torch_state(model):
    """Everything our hooks could touch, as plain comparable values."""
    from torch.distributed import distributed_c10d
    from torch.nn.modules import module as nn_module
    from torch.optim import optimizer
    from torch.utils.data.dataloader import _BaseDataLoaderIter

    return {
        "function modes": torch._C._len_torch_function_stack(),
        "dispatch modes": torch._C._len_torch_dispatch_stack(),
        "Tensor attributes": dict(vars(torch.Tensor)),
        "TensorBase attributes": dict(vars(torch._C.TensorBase)),
        "torch.distributed": _functions_of(dist),
        "distributed_c10d": _functions_of(distributed_c10d),
        "optimizer hooks": (dict(optimizer._global_optimizer_pre_hooks),
                            dict(optimizer._global_optimizer_post_hooks)),
        "global module hooks": [dict(getattr(nn_module, name)) for name in _GLOBAL_MODULE_HOOKS],
        "module hooks": {path: [dict(getattr(module, name)) for name in _MODULE_HOOK_DICTS]
                         for path, module in model.named_modules()},
        "parameter hooks": {name: (dict(p._post_accumulate_grad_hooks or {}), dict(p._backward_hooks or {}))
                            for name, p in model.named_parameters()},
        "DataLoader __next__": _BaseDataLoaderIter.__dict__["__next__"],
        "gc thresholds": gc.get_threshold(),
        # autograd's Node hook registration: the window registers through Node.register_hook, never replaces it
        "Node hook registration": vars(torch.autograd.function._HookMixin).get("_register_hook"),
    }


def _assert_same_state(before, after):
    for key, value in before.items():
        assert after[key] == value, f"{key} changed"


@pytest.mark.parametrize("level", ["L0", "L1", "mix", "L2"])
def test_stop_leaves_torch_exactly_as_it_was(tmp_path, level):
    model = TinyTransformer()
    before = torch_state(model)
    debugger = PrecisionDebugger(config_path=write_config(tmp_path, "statistics", level), model=model)
    train(model, debugger, steps=2)
    debugger.start()
    assert torch_state(model) != before  # hooks are in while dumping
    # and young collections are rarer: the window's records would set off full collections (core/dump/session.py)
    assert gc.get_threshold()[0] == max(before["gc thresholds"][0], 50_000)
    out = model(torch.randint(0, 20, (1, 3)))
    debugger.stop()
    _assert_same_state(before, torch_state(model))
    out.sum().backward()  # a graph built while dumping, run after stop(): nothing recorded, no error
    debugger.close()
    _assert_same_state(before, torch_state(model))


def test_young_threshold_comes_back_after_the_tracker_dropped_the_steps_records(tmp_path, monkeypatch):
    """The collection that follows stop() walks what survives the step, not the grad tracker's pending records and
    hooks (on a small Llama that walk was 3.5 ms a step instead of 1): the threshold is restored last."""
    from msprobe.core.dump import session as session_module

    model = TinyTransformer()
    debugger = PrecisionDebugger(config_path=write_config(tmp_path, "statistics", "L1"), model=model)
    debugger.start()
    tracker = debugger.session.tracker  # the window's TorchDumpSession
    model(torch.randint(0, 20, (1, 3))).float().pow(2).mean().backward()
    assert tracker.pending and tracker.handles  # the step left pending records and hooks behind
    seen = []
    real_set_threshold = gc.set_threshold

    def set_threshold(*threshold):
        seen.append((threshold, len(tracker.pending), len(tracker.handles)))
        real_set_threshold(*threshold)

    monkeypatch.setattr(session_module.gc, "set_threshold", set_threshold)
    debugger.stop()
    monkeypatch.undo()
    debugger.close()
    assert len(seen) == 1 and seen[0][0][0] < 50_000  # the window's raised threshold, put back once
    assert seen[0][1:] == (0, 0)  # by then the tracker had let go of everything it held for the step


def test_a_finished_steps_statistics_cache_is_freed_without_the_garbage_collector(tmp_path):
    """The C describer's slow path is its builder's own method: a cycle that kept each step's cache entries (a third
    of a small Llama's step objects) until a later collection found it. step() breaks it."""
    model = TinyTransformer()
    debugger = PrecisionDebugger(config_path=write_config(tmp_path, "statistics", "L1"), model=model)
    gc.collect()
    gc.disable()
    try:
        debugger.start()
        model(torch.randint(0, 20, (1, 3))).float().pow(2).mean().backward()
        records = weakref.ref(debugger.collector.records)
        cached = len(records()._stats_cache)
        debugger.stop()
        debugger.step()
        assert cached > 10 and records() is None and debugger.collector.records._stats_cache == {}
    finally:
        gc.enable()
        debugger.close()
    assert len(load_rank(tmp_path / "dump", 0)[0]["data"]) > 10  # the step's files kept what the cache described


@pytest.mark.parametrize("failing", ["api_mode", "collectives", "aten_mode"])
def test_a_failing_install_leaves_nothing_behind(tmp_path, monkeypatch, failing):
    from msprobe.pytorch.dump.api_hooks import ApiDumpMode
    from msprobe.pytorch.dump.aten_hooks import AtenDumpMode
    from msprobe.pytorch.dump import distributed_hooks

    def broken(*args, **kwargs):
        raise RuntimeError("install failed")

    target, name, level = {"api_mode": (ApiDumpMode, "install", "mix"),
                           "collectives": (distributed_hooks, "_wrapper", "mix"),
                           "aten_mode": (AtenDumpMode, "__enter__", "L2")}[failing]
    torch.manual_seed(0)
    plain = TinyTransformer()
    torch.manual_seed(0)
    model = TinyTransformer()
    plain_losses = train(plain, steps=1)
    before = torch_state(model)
    monkeypatch.setattr(target, name, broken)
    debugger = PrecisionDebugger(config_path=write_config(tmp_path, "statistics", level), model=model)
    debugger.start()  # installs module hooks etc. first (at mix), then fails: all of it is undone
    _assert_same_state(before, torch_state(model))
    assert debugger.session is None and "PrecisionDebugger.start" in debugger.collector.guard.failed
    assert not distributed_hooks._ACTIVE  # the collectives' wrappers record through nothing
    debugger.stop()
    debugger.step()
    assert train(model, debugger, steps=1) == plain_losses  # training goes on, undumped
    debugger.close()
    _assert_same_state(before, torch_state(model))


def test_collect_dumps_the_block_and_stops_on_exception(tmp_path):
    model = MLP()
    before = torch_state(model)
    debugger = PrecisionDebugger(config_path=write_config(tmp_path, "statistics", "mix"), model=model)
    with debugger.collect(model):
        assert torch._C._len_torch_function_stack() == 1
        model(torch.randn(3, 4)).sum().backward()
    _assert_same_state(before, torch_state(model))
    debugger.step()
    with pytest.raises(ValueError, match="user error"):
        with debugger.collect():
            model(torch.randn(3, 4))
            raise ValueError("user error")
    _assert_same_state(before, torch_state(model))
    debugger.close()
    first = load_rank(tmp_path / "dump", step=0)[0]["data"]
    assert {"Module.fc1.Linear.forward.0", "Module.fc1.Linear.backward.0", "Functional.linear.0.backward"} <= set(first)
    second = load_rank(tmp_path / "dump", step=1)[0]["data"]  # the step that raised keeps its forward data
    assert "Module.fc2.Linear.forward.0" in second


def _broken_statistics(monkeypatch):
    from msprobe.pytorch.dump.adapter import TorchAdapter

    def broken(self, tensor, *_):
        raise RuntimeError("statistics exploded")

    # both ways to a tensor's statistics: the fused first-sight path (tensor_digest) and the plain one
    monkeypatch.setattr(TorchAdapter, "tensor_stats", broken)
    monkeypatch.setattr(TorchAdapter, "tensor_digest", broken)


def test_a_failing_statistic_at_L2_never_breaks_training(tmp_path, monkeypatch, capsys):
    torch.manual_seed(0)
    plain = TinyTransformer()
    torch.manual_seed(0)
    dumped = TinyTransformer()
    plain_losses = train(plain, steps=2)
    _broken_statistics(monkeypatch)
    debugger = PrecisionDebugger(config_path=write_config(tmp_path, "statistics", "L2"), model=dumped)
    dumped_losses = train(dumped, debugger, steps=2)
    debugger.close()
    assert [x.hex() for x in plain_losses] == [x.hex() for x in dumped_losses]
    for (name, want), got in zip(plain.named_parameters(), dumped.parameters()):
        assert torch.equal(want, got), name
    failed = debugger.collector.guard.failed
    key = max((k for k in failed if k.startswith("Aten.")), key=failed.get)
    assert failed[key] > 2  # failed on every call of both steps ...
    assert capsys.readouterr().out.count(f"cannot dump {key} ") == 1  # ... and said so once


class AllReduceMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        y = self.fc(x)
        dist.all_reduce(y)
        return y


def test_a_failing_statistic_in_a_collective_never_breaks_training(tmp_path, monkeypatch, capsys):
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1)
    try:
        torch.manual_seed(0)
        plain = AllReduceMLP()
        torch.manual_seed(0)
        dumped = AllReduceMLP()
        plain_losses = train(plain, steps=2)
        _broken_statistics(monkeypatch)
        debugger = PrecisionDebugger(config_path=write_config(tmp_path, "statistics", "L1"), model=dumped)
        dumped_losses = train(dumped, debugger, steps=2)
        debugger.close()
    finally:
        dist.destroy_process_group()
    assert [x.hex() for x in plain_losses] == [x.hex() for x in dumped_losses]
    assert all(torch.equal(a, b) for a, b in zip(plain.parameters(), dumped.parameters()))
    assert debugger.collector.guard.failed.get("Distributed.all_reduce") == 2
    assert capsys.readouterr().out.count("cannot dump Distributed.all_reduce ") == 1


def test_a_collective_kept_from_a_window_records_only_inside_one(tmp_path):
    """The collectives' wrappers are built once and patched in at each start(): one kept past stop() runs the
    collective unrecorded, and records again in the next window (through that window's hooks)."""
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1)
    try:
        original = dist.all_reduce
        debugger = PrecisionDebugger(config_path=write_config(tmp_path, "statistics", "L1"))
        debugger.start()
        kept = dist.all_reduce
        assert kept is not original and kept.__wrapped__ is original
        kept(torch.ones(3))
        debugger.stop()
        debugger.step()
        assert dist.all_reduce is original
        y = torch.full((3,), 2.0)
        kept(y)  # outside a window: the plain collective
        assert y.tolist() == [2.0, 2.0, 2.0]
        debugger.start()
        assert dist.all_reduce is kept  # the same wrapper
        kept(torch.ones(2))
        debugger.stop()
        debugger.step()
        debugger.close()
    finally:
        dist.destroy_process_group()
    first, second = (load_rank(tmp_path / "dump", step, 0)[0]["data"] for step in (0, 1))
    assert [n for n in first if n.startswith("Distributed.")] == ["Distributed.all_reduce.0.forward"]
    assert [n for n in second if n.startswith("Distributed.")] == ["Distributed.all_reduce.0.forward"]
    assert second["Distributed.all_reduce.0.forward"]["input_args"][0]["shape"] == [2]
