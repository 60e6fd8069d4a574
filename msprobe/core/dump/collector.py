"""The dump collector: receives call events from framework hooks and builds one step's dump.

Framework hooks report three kinds of events:

    call = collector.begin_forward("Functional.linear", args, kwargs)        # before the call
    collector.end_forward(call, output)                                     # after it
    collector.backward(call, grads_of_outputs, grads_of_inputs)             # when grads arrived

(modules pass `is_module=True`, a key like "Module.l1.Linear" and their `parameters`; parameter
gradients go to `parameters_grad`). The collector names calls ("Functional.linear.0.forward",
"Module.l1.Linear.forward.0"), applies the step/rank/scope/list/data_mode filters, keeps the
module stack for construct.json, captures stack.json, runs the task (statistics / tensor /
overflow_check) and hands finished steps to the writer. It never imports a framework.
"""
import atexit
import math
import os

from msprobe.core.dump.filters import CallFilter
from msprobe.core.dump.guard import DumpGuard
from msprobe.core.dump.record import RecordBuilder
from msprobe.core.dump.stack import StackCapture
from msprobe.core.dump.writer import TENSOR_DIR, DumpWriter, rank_dir_name
from msprobe.core.log import logger

__all__ = ["DumpCollector", "ForwardCall"]

PARAMS_GRAD = "parameters_grad"


class ForwardCall:
    """One forward call in progress (returned by begin_forward, passed back to the other events)."""
    __slots__ = ("key", "name", "index", "is_module", "dump", "entry", "parent", "list_matched",
                 "stack", "step")

    def __init__(self, key, name, index, is_module, dump, parent, step):
        self.key, self.name, self.index, self.is_module = key, name, index, is_module
        self.dump, self.parent, self.step = dump, parent, step
        self.entry = {}
        self.list_matched = False
        self.stack = None

    @property
    def backward_name(self):
        if self.is_module:
            return f"{self.key}.backward.{self.index}"
        return f"{self.key}.{self.index}.backward"


def _backward_of(forward_name):
    if forward_name is None:
        return None
    if ".forward." in forward_name:
        return forward_name.replace(".forward.", ".backward.")
    return forward_name[: -len("forward")] + "backward" if forward_name.endswith(".forward") else forward_name


def _has_overflow(desc):
    """True when any tensor descriptor inside `desc` has an inf/nan statistic."""
    if isinstance(desc, (list, tuple)):
        return any(_has_overflow(d) for d in desc)
    if isinstance(desc, dict):
        if "Max" in desc:
            # Max/Min only: an inf/nan element always shows there, while Norm of large finite
            # values can overflow float32 on its own
            return any(isinstance(desc[k], float) and not math.isfinite(desc[k]) for k in ("Max", "Min"))
        return any(_has_overflow(d) for d in desc.values())
    return False


class DumpCollector:
    """Collects one rank's dump for a DebuggerConfig through a framework adapter."""

    def __init__(self, config, adapter, stack_capture=None):
        self.config = config
        self.adapter = adapter
        self.task = config.task
        self.level = config.level
        self.filter = CallFilter(config)
        self.guard = DumpGuard()  # hooks report their failures here (the user's call goes on)
        self.writer = DumpWriter(config.dump_path, adapter.save_tensor)
        self.stack_capture = stack_capture or StackCapture()
        self.current_step = 0
        self.rank = None
        self.active = False
        self.overflow_count = 0
        self.finished = False  # overflow_nums reached
        wants = config.wants  # data_mode, resolved once: these are asked on every call
        self.want_forward_input = wants("forward", "input")
        self.want_forward_output = wants("forward", "output")
        self.want_backward_input = wants("backward", "input")
        self.want_backward_output = wants("backward", "output")
        self._reset_step()
        atexit.register(self._flush_at_exit)

    # -- lifecycle --------------------------------------------------------------------------
    def _reset_step(self):
        saves = self._queue_tensor if self.task in ("tensor", "overflow_check") else None
        self.records = RecordBuilder(self.adapter, self.config.summary_mode, save_tensor=saves)
        self.counters = {}
        self.data = {}
        self.stacks = {}
        self.construct = {}
        self.debug_data = {}
        self.module_stack = []
        self._saved_files = {}
        self._buffered_saves = []
        self.dirty = False
        self.filter.reset()

    def step_enabled(self):
        """Whether the current step and rank are selected (and overflow_nums not reached)."""
        cfg = self.config
        if self.finished or (cfg.step and self.current_step not in cfg.step):
            return False
        return not cfg.rank or (self.rank if self.rank is not None else 0) in cfg.rank

    def start(self, rank=None):
        """Begin collecting (the rank is known only now: distributed init may come late)."""
        self.rank = rank
        self.active = self.step_enabled()
        return self.active

    def stop(self):
        """Stop collecting and hand the step's files to the writer (returns without waiting for them)."""
        self.active = False
        self.flush()
        self.writer.report()

    def next_step(self):
        """End the current step: write what is left, reset counters, advance the step number."""
        self.active = False
        self.flush()
        self.current_step += 1
        self._reset_step()

    def _flush_at_exit(self):
        """The process ends (normally or by an exception) inside a step: keep what was collected."""
        try:
            self.active = False
            self.flush()
            self.writer.drain()
            self.writer.report()
        except Exception as exc:  # never turn an exit into a second traceback
            logger.warning(f"msprobe: could not write the last step at exit: {exc}")

    def close(self):
        """Write everything, say what could not be written, end the writer's threads, forget the exit hook."""
        self.active = False
        self.flush()
        self.writer.close()
        self.writer.report()
        atexit.unregister(self._flush_at_exit)

    def all_steps_done(self):
        return self.finished or bool(self.config.step and self.current_step > max(self.config.step))

    # -- forward ----------------------------------------------------------------------------
    def begin_forward(self, key, args, kwargs, is_module=False):
        """Name the call, decide whether it is dumped, describe its inputs (before in-place ops)."""
        index = self.counters.get(key, 0)
        self.counters[key] = index + 1
        name = f"{key}.forward.{index}" if is_module else f"{key}.{index}.forward"
        parent = self.module_stack[-1] if self.module_stack else None
        dump = self.filter.enter(name, is_module)
        call = ForwardCall(key, name, index, is_module, dump, parent, self.current_step)
        if is_module:
            self.module_stack.append(name)
            call.list_matched = self.filter.list_matches(name)
        if dump:
            call.stack = self.stack_capture.capture(2)
            if self.want_forward_input:
                records = self.records
                call.entry["input_args"] = records.describe_args(args, f"{name}.input")
                call.entry["input_kwargs"] = records.describe_kwargs(kwargs or {}, f"{name}.input")
        return call

    def abandon_forward(self, call):
        """The call raised: close a module's call without recording it."""
        if call.is_module:
            if self.module_stack and self.module_stack[-1] == call.name:
                self.module_stack.pop()
            self.filter.leave(call.name, True, call.list_matched)

    def end_forward(self, call, output, parameters=None):
        """Describe the outputs (and a module's own parameters) and commit the forward entry."""
        if call.is_module:
            if self.module_stack and self.module_stack[-1] == call.name:
                self.module_stack.pop()
            self.filter.leave(call.name, True, call.list_matched)
        if not call.dump or not self.active:
            return
        entry = call.entry
        if self.want_forward_output:
            entry["output"] = self.records.describe_output(output, f"{call.name}.output")
        if parameters is not None and (self.want_forward_input or self.want_forward_output):
            entry["parameters"] = {str(k): self.records.describe(v, f"{call.name}.parameters.{k}")
                                   for k, v in parameters.items()}
        if entry:  # data_mode without forward data: no forward entry (only its backward)
            self._commit(call.name, entry, call.parent, call.stack, check_key="output")
        if call.is_module and parameters and self.want_backward_output:
            grad_name = f"{call.key}.{PARAMS_GRAD}"
            if grad_name not in self.data:
                self.data[grad_name] = {str(k): None for k in parameters}

    def tensors_changed(self, values):
        """Tensors (or lists of them) written in place without a version bump (e.g. by collectives)."""
        for value in values:
            if isinstance(value, (list, tuple)):
                self.tensors_changed(value)
            elif self.adapter.is_tensor(value):
                self.records.forget(value)
                self._saved_files.pop(self.adapter.tensor_identity(value), None)

    # -- backward ---------------------------------------------------------------------------
    def backward(self, call, grads_of_outputs, grads_of_inputs):
        """Commit a backward entry: `input` = grads w.r.t. forward outputs, `output` = grads
        w.r.t. forward inputs (None where an input has no grad)."""
        if not call.dump or not self.active or call.step != self.current_step:
            return
        name = call.backward_name
        entry = {}
        if self.want_backward_input:
            entry["input"] = self.records.describe_args(grads_of_outputs, f"{name}.input")
        if self.want_backward_output:
            entry["output"] = self.records.describe_args(grads_of_inputs, f"{name}.output")
        if not entry:
            return
        self._commit(name, entry, _backward_of(call.parent), None, check_key="output")

    def parameters_grad(self, module_key, param_name, grad):
        """Record the gradient of one parameter of a dumped module ("{key}.parameters_grad")."""
        name = f"{module_key}.{PARAMS_GRAD}"
        current = self.data.get(name)
        if not self.active or current is None or param_name not in current:
            return
        desc = self.records.describe(grad, f"{name}.{param_name}")
        if self.task == "overflow_check":
            self.records.resolve()
            if not _has_overflow(desc):
                self._drop_buffered(f"{name}.{param_name}")
                return
            self._submit_buffered(f"{name}.{param_name}")
        self.data[name] = {**current, param_name: (desc,)}  # replace, never mutate: the writer may hold it
        self.dirty = True

    # -- debugger.save ----------------------------------------------------------------------
    def save_variable(self, name, value, index=None):
        """debugger.save: an arbitrary value as "{name}.{index}.debug" in debug.json; returns index."""
        if not self.active:
            return None
        if index is None:
            index = self.counters.get(("debug", name), 0)
            self.counters[("debug", name)] = index + 1
        entry_name = f"{name}.{index}.debug"
        self.debug_data[entry_name] = self.records.describe(value, entry_name)
        self.dirty = True
        return index

    # -- commit & overflow ------------------------------------------------------------------
    def _commit(self, name, entry, parent, stack, check_key):
        if self.task == "overflow_check":
            self.records.resolve()
            if not _has_overflow(entry.get(check_key)):
                self._drop_buffered(name)
                return
            self._submit_buffered(name)
        self.data[name] = entry
        if stack is not None:
            self.stacks[name] = stack
        if self.level != "L1":
            self.construct[name] = parent
        self.dirty = True
        if self.task == "overflow_check":
            self._count_overflow(name)

    def _count_overflow(self, name):
        self.overflow_count += 1
        logger.warning(f"msprobe overflow_check: inf/nan found in {name}.")
        limit = self.config.overflow_nums
        if limit != -1 and self.overflow_count >= limit:
            self.finished = True
            self.flush()
            self.active = False
            logger.info(f"msprobe overflow_check: reached overflow_nums={limit}; dumping stops.")

    # -- tensor files -----------------------------------------------------------------------
    def _queue_tensor(self, tensor, file_name):
        if self.task == "overflow_check":
            self._buffered_saves.append((file_name, self.adapter.copy_for_save(tensor)))
            return
        key = self.adapter.tensor_identity(tensor)
        first = self._saved_files.get(key) if key is not None else None
        # same memory, layout and version, and the same bits as the snapshot taken then: one file. The
        # bit check is cheap next to a file write, and catches memory reused or written behind the
        # version counter (collectives, numpy views)
        if first is not None and self.adapter.same_content(first[1], tensor):
            self.writer.link_tensor(self.current_step, self.rank, first[0], file_name)
            return
        snapshot = self.adapter.copy_for_save(tensor)
        if key is not None:
            self._saved_files[key] = (file_name, snapshot)
        self.writer.save_tensor(self.current_step, self.rank, snapshot, file_name)

    def _split_buffered(self, prefix):
        mine = [s for s in self._buffered_saves if s[0].startswith(prefix + ".")]
        self._buffered_saves = [s for s in self._buffered_saves if not s[0].startswith(prefix + ".")]
        return mine

    def _drop_buffered(self, prefix):
        self._split_buffered(prefix)

    def _submit_buffered(self, prefix):
        for file_name, snapshot in self._split_buffered(prefix):
            self.writer.save_tensor(self.current_step, self.rank, snapshot, file_name)

    # -- output -----------------------------------------------------------------------------
    def dump_data_dir(self):
        if self.task == "statistics":
            return None
        return os.path.join(self.config.dump_path, f"step{self.current_step}", rank_dir_name(self.rank),
                            TENSOR_DIR)

    def flush(self):
        """Resolve statistics and hand the step's JSON files to the writer (if anything changed)."""
        if not self.dirty:
            return
        self.records.resolve()
        data = {}
        for name, entry in self.data.items():
            if name.endswith(PARAMS_GRAD):
                entry = {k: v for k, v in entry.items() if v is not None}
                if not entry:
                    continue
            data[name] = entry
        files = {"dump.json": {"task": self.task, "level": self.level, "framework": self.adapter.framework,
                               "dump_data_dir": self.dump_data_dir(), "data": data},
                 "stack.json": dict(self.stacks),
                 "construct.json": dict(self.construct)}
        if self.debug_data:
            files["debug.json"] = {"task": self.task, "level": "debug", "framework": self.adapter.framework,
                                   "dump_data_dir": self.dump_data_dir(), "data": dict(self.debug_data)}
        # the step's tensor files, then these: written while the next step runs (the writer waits here
        # only while the previous step is still unwritten)
        self.writer.write_json(self.current_step, self.rank, files)
        self.dirty = False
