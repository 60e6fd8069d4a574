"""PtdbgDispatch: check every ATen op of a code block against a high-precision CPU re-run, while it runs.

Example::

    from msprobe.pytorch.online_dispatch import PtdbgDispatch
    with PtdbgDispatch(dump_mode="auto", dump_path="./online_dispatch"):
        loss = model(inputs).sum()
        loss.backward()          # backward ops are checked too

A `TorchDispatchMode` sees every ATen op (forward and backward) however the user called it. Each op runs
as usual on its device in its dtype (the device under test); its inputs are then re-run on CPU in
float32 (or `bench_dtype="float64"`) and each output is judged with the thresholds of the device dtype.
The model's own results are never touched: the handler returns the device output as it came.
"""
import threading
from typing import Dict, Iterable, Optional

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves, tree_map

from msprobe.core.errors import ConfigError
from msprobe.core.framework import current_rank
from msprobe.core.log import logger
from msprobe.pytorch.framework import FRAMEWORK
from msprobe.pytorch.online_dispatch.checker import BENCH_DTYPES, check_call, tensor_leaves
from msprobe.pytorch.online_dispatch.op_call import OpCall
from msprobe.pytorch.online_dispatch.report import create_run_dir, write_reports
from msprobe.pytorch.online_dispatch.skip_list import RANDOM, draws_random_numbers, skip_reason
from msprobe.pytorch.online_dispatch.widen_cache import WidenCache

__all__ = ["PtdbgDispatch", "DUMP_MODES"]

DUMP_MODES = ("auto", "all", "list", "OFF")
_WORKER_NAMESPACES = ("aten", "prims")  # ops a fresh worker process knows; others are checked in-process


def _snapshot(value):
    """A detached CPU copy of a tensor argument, so later in-place updates cannot reach it."""
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", copy=True)
    return value


def _has_tensor(value) -> bool:
    """Whether an argument structure holds a tensor (the common flat shapes without pytree's generality)."""
    if isinstance(value, torch.Tensor):
        return True
    if isinstance(value, (list, tuple)):
        return any(_has_tensor(item) for item in value)
    if isinstance(value, dict):
        return any(_has_tensor(item) for item in value.values())
    return False


def _validate(dump_mode, api_list, dump_path, tag, process_num, debug, bench_dtype) -> Optional[frozenset]:
    if dump_mode not in DUMP_MODES:
        raise ConfigError(f"PtdbgDispatch: dump_mode must be one of {', '.join(DUMP_MODES)}, got {dump_mode!r}.")
    if not isinstance(dump_path, str) or not dump_path:
        raise ConfigError("PtdbgDispatch: dump_path is required (a folder for the results).")
    if tag is not None and not isinstance(tag, str):
        raise ConfigError(f"PtdbgDispatch: tag must be a string or None, got {tag!r}.")
    if not isinstance(process_num, int) or isinstance(process_num, bool) or not 0 <= process_num <= 64:
        raise ConfigError(f"PtdbgDispatch: process_num must be an integer from 0 to 64, got {process_num!r}.")
    if not isinstance(debug, bool):
        raise ConfigError(f"PtdbgDispatch: debug must be True or False, got {debug!r}.")
    if bench_dtype not in BENCH_DTYPES:
        raise ConfigError(f"PtdbgDispatch: bench_dtype must be 'float32' or 'float64', got {bench_dtype!r}.")
    if dump_mode == "list":
        if not api_list or isinstance(api_list, str) or not all(isinstance(a, str) for a in api_list):
            raise ConfigError("PtdbgDispatch: dump_mode='list' needs api_list, a list of ATen op names "
                              "such as ['addmm', 'native_layer_norm'].")
        return frozenset(api_list)
    if api_list:
        logger.warning("PtdbgDispatch: api_list is used only with dump_mode='list'; it has no effect here.")
    return None


class PtdbgDispatch(TorchDispatchMode):
    """Online accuracy check of every ATen op inside the `with` block; see the module docstring.

    dump_mode: 'OFF' (results only), 'auto' (tensors of failing ops), 'all', 'list' (ops named in api_list).
    process_num: 0 checks in the training thread; N > 0 checks in N worker processes.
    bench_dtype: 'float32' (default, as msprobe 1.2.1) or 'float64'.
    """

    def __init__(self, dump_mode: str = "OFF", api_list: Optional[Iterable[str]] = None, dump_path: str = None,
                 tag: Optional[str] = None, process_num: int = 0, debug: bool = False, bench_dtype: str = "float32"):
        super().__init__()
        self._dump_list = _validate(dump_mode, api_list, dump_path, tag, process_num, debug, bench_dtype)
        self.dump_mode, self.dump_path, self.tag = dump_mode, dump_path, tag
        self.process_num, self.debug, self.bench_dtype = process_num, debug, bench_dtype
        self.run_dir = self.summary_path = self.details_path = None
        self._lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        self._op_facts: Dict[object, tuple] = {}
        self._indices: Dict[str, int] = {}
        self._sequence = 0
        self._summaries, self._details = [], []
        self._pool = None
        self._broken_ops = set()
        self._widened = WidenCache()
        self.unchecked = 0
        # time spent widening inputs for the CPU, re-running there, and judging (with dumps)
        self.seconds = {"convert": 0.0, "rerun": 0.0, "judge": 0.0}

    # ---- session ---------------------------------------------------------------------------------
    def __enter__(self):
        self._reset()
        self._rank = current_rank(FRAMEWORK, default=0)
        self.run_dir, self._stamp = create_run_dir(self.dump_path, self.tag, self._rank)
        if self.process_num:
            from msprobe.pytorch.online_dispatch.worker_pool import WorkerPool
            self._pool = WorkerPool(self.process_num, self.bench_dtype, self._dump_dir, self._dump_failed,
                                    on_outcome=self._record)
        return super().__enter__()

    def __exit__(self, exc_type, exc_value, traceback):
        result = super().__exit__(exc_type, exc_value, traceback)
        self._widened.clear()
        if self._pool is not None:
            outcomes = self._pool.close()
            self.unchecked = self._pool.submitted - len(outcomes)
            self._pool = None
        self.summary_path, self.details_path = write_reports(self.run_dir, self._stamp, self._rank,
                                                             self._summaries, self._details)
        failed = sum(1 for row in self._summaries if row["Accuracy Reached or Not"] == "No")
        not_run = sum(1 for row in self._summaries if row["Accuracy Reached or Not"] == "Skipped")
        message = (f"online_dispatch: {len(self._summaries)} ops checked, {failed} failed, {not_run} not re-run "
                   f"on CPU; results in {self.run_dir}")
        logger.info(message + (f"; {self.unchecked} ops not checked (a worker stopped)" if self.unchecked else ""))
        return result

    @property
    def _dump_dir(self) -> Optional[str]:
        return None if self.dump_mode == "OFF" else self.run_dir

    @property
    def _dump_failed(self) -> bool:
        return self.dump_mode == "auto"

    @property
    def results(self):
        """(summary rows, detail rows) recorded so far, in the order the ops ran."""
        with self._lock:
            return (sorted(self._summaries, key=lambda r: r["sequence"]),
                    sorted(self._details, key=lambda r: (r["sequence"], r["Output Index"])))

    def _record(self, outcome: Dict) -> None:
        summary = outcome["summary"]
        with self._lock:
            self._summaries.append(summary)
            self._details.extend(outcome["details"])
            for key, value in outcome.get("seconds", {}).items():
                self.seconds[key] += value
        if outcome["failed"]:
            logger.warning("online_dispatch: %s (%s) Failed: %s", summary["Op Name"], summary["Direction"],
                           summary["Message"])
        elif self.debug:
            logger.info("online_dispatch: %s (%s) %s %s", summary["Op Name"], summary["Direction"],
                        summary["Accuracy Reached or Not"], summary["Message"])

    # ---- per op ----------------------------------------------------------------------------------
    def _op_info(self, func) -> tuple:
        """(skip reason with a tensor input, without one, namespace, mutable, name, qualified name) of an op,
        read from its schema once per context."""
        info = self._op_facts.get(func)
        if info is None:
            info = self._op_facts[func] = (skip_reason(func, True), skip_reason(func, False), func.namespace,
                                             func._schema.is_mutable, func._overloadpacket.__name__, func.name())
        return info

    def _next_call_ids(self, name: str):
        with self._lock:
            index = self._indices.get(name, 0)
            self._indices[name] = index + 1
            self._sequence += 1
            return index, self._sequence

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        mutable = False
        try:
            with_tensor, without_tensor, namespace, mutable, _, _ = self._op_info(func)
            reason = with_tensor if _has_tensor(args) or _has_tensor(kwargs) else without_tensor
            if reason == RANDOM and not draws_random_numbers(func, args, kwargs):
                reason = None
            in_worker = self._pool is not None and namespace in _WORKER_NAMESPACES
            snapshot = None
            if reason is None and (mutable or in_worker):
                snapshot = (tree_map(_snapshot, args), tree_map(_snapshot, kwargs))
        except Exception as exc:  # our own failure must never reach the training script
            self._report_broken(func, exc)
            reason = "broken"
        if reason is not None:
            if self.debug:
                logger.info("online_dispatch: %s not checked (%s)", func, reason)
            out = func(*args, **kwargs)
            if mutable:
                self._forget_written(func, args, kwargs)
            return out
        out = func(*args, **kwargs)
        if mutable:
            self._forget_written(func, args, kwargs)
        try:
            self._check(func, args, kwargs, out, snapshot, in_worker)
        except Exception as exc:
            self._report_broken(func, exc)
        return out

    def _forget_written(self, func, args, kwargs) -> None:
        """A mutable op ran: widened copies of the tensors it was given may be stale."""
        try:
            for leaf in tree_leaves((args, kwargs)):
                if isinstance(leaf, torch.Tensor):
                    self._widened.written(leaf)
        except Exception as exc:
            self._report_broken(func, exc)

    def _check(self, func, args, kwargs, out, snapshot, in_worker) -> None:
        name, qualified = self._op_info(func)[4:]
        index, sequence = self._next_call_ids(name)
        direction = "backward" if torch._C._current_graph_task_id() != -1 else "forward"
        outputs = tensor_leaves(out)
        if in_worker:
            outputs = [_snapshot(t) for t in outputs]
        call_args, call_kwargs = snapshot if snapshot is not None else (args, kwargs)
        dump = self.dump_mode == "all" or (self._dump_list is not None and name in self._dump_list)
        call = OpCall(qualified, name, index, direction, call_args, call_kwargs, outputs, dump, sequence)
        if in_worker:
            self._pool.submit(call)
        else:
            cache = self._widened if snapshot is None else None  # a mutable op's re-run writes into its inputs
            self._record(check_call(call, self.bench_dtype, self._dump_dir, self._dump_failed, cache))

    def _report_broken(self, func, exc: Exception) -> None:
        if func not in self._broken_ops:
            self._broken_ops.add(func)
            logger.warning("online_dispatch: cannot check %s (%s: %s); the op itself ran normally.",
                           func, type(exc).__name__, exc)
