"""The dump collector: receives call events from framework hooks and builds one step's dump.

Framework hooks report three kinds of events:

    call = collector.begin_forward("Functional.linear", args, kwargs)        # before the call
    output = collector.end_forward(call, output)                            # after it (may replace it)
    collector.backward(call, grads_of_outputs, grads_of_inputs)             # when grads arrived

(modules pass `is_module=True`, a key like "Module.l1.Linear" and their `parameters`; parameter
gradients go to `parameters_grad`). The collector names calls: a ForwardCall carries the structured name
(key, call index, module or not; `entry_name` gives it as a naming.EntryName) and formats the entry name
("Functional.linear.0.forward", "Module.l1.Linear.forward.0") once, for the record; the filters read the
fields, nothing parses a name back. It applies the step/rank/scope/list/data_mode filters, keeps the
module stack for construct.json, captures stack.json and builds the descriptors; the task (tasks/,
chosen by config "task") decides which tensors are saved and which records are kept, through a
TaskContext (commit, save, resolve, finish), not the collector. Finished steps go to the writer. It
never imports a framework.
"""
import atexit
import os
from typing import Any, Dict, List, Optional

from msprobe.core.dump.filters import CallFilter
from msprobe.core.dump.guard import DumpGuard
from msprobe.core.dump.record import RecordBuilder, layout_mirror
from msprobe.core.dump.rng_audit import is_random_call
from msprobe.core.dump.stack import StackCapture
from msprobe.core.dump.tasks import Record, Task, TaskContext, task_for
from msprobe.core.dump.tensor_files import TensorFiles
from msprobe.core.dump.writer import TENSOR_DIR, DumpWriter, rank_dir_name
from msprobe.core.log import logger
from msprobe.core.naming import EntryName

__all__ = ["DumpCollector", "ForwardCall", "CollectorContext"]

PARAMS_GRAD = "parameters_grad"


class ForwardCall:
    """One forward call in progress (returned by begin_forward, passed back to the other events).

    The structured name: `key` ("Functional.linear", "Module.l1.Linear"), `index` (per key and step) and
    `is_module`; `name` is the entry name, formatted once. `parent` / `parent_backward`: the enclosing
    module's forward / backward entry names (construct.json). `function` may be set by a hook to the
    callable being run, for tasks that run a call again."""
    __slots__ = ("key", "name", "index", "is_module", "dump", "entry", "parent", "parent_backward",
                 "list_matched", "stack", "step", "tensors", "function", "_backward_name")

    def __init__(self, key: str, index: int, is_module: bool, parent: Optional[Any], step: int,
                 keeps_tensors: bool = True) -> None:
        self.key, self.index, self.is_module, self.step = key, index, is_module, step
        self.name = f"{key}.forward.{index}" if is_module else f"{key}.{index}.forward"
        if parent is None:
            self.parent = self.parent_backward = None
        else:
            self.parent, self.parent_backward = parent.name, parent.backward_name
        self.dump = False
        self.entry: Dict[str, Any] = {}
        self.list_matched = False
        self.stack = None
        # the task's candidate tensors (see tasks.Task.tensor_seen); a task without tensor_seen keeps none: one empty
        # tuple for all its calls (an empty list each was a tenth of what a step left to the garbage collector)
        self.tensors: Any = [] if keeps_tensors else ()
        self.function = None
        self._backward_name: Optional[str] = None

    @property
    def call_name(self) -> str:
        """The entry name without its direction: 'Functional.linear.0', 'Module.l1.Linear.0'."""
        return f"{self.key}.{self.index}"

    @property
    def api(self) -> str:
        """The API path ('linear', 'linalg.vector_norm'), or the module path and class ('l1.Linear')."""
        return self.key.split(".", 1)[-1]

    @property
    def entry_name(self) -> EntryName:
        prefix, _, api = self.key.partition(".")
        return EntryName(prefix, api, str(self.index), "forward", self.is_module)

    @property
    def backward_name(self) -> str:
        name = self._backward_name
        if name is None:
            key, index = self.key, self.index
            name = self._backward_name = f"{key}.backward.{index}" if self.is_module else f"{key}.{index}.backward"
        return name


class Region:
    """A named parent that is not a module call ("optimizer": calls inside optimizer.step())."""
    __slots__ = ("name", "backward_name")

    def __init__(self, name: str) -> None:
        self.name = self.backward_name = name


class CollectorContext:
    """What a task may use of the collector (tasks.TaskContext): the config, the framework adapter, the
    step and rank, and five actions — commit a record, save a tensor file (or write a snapshot the task
    took), resolve pending statistics, finish the dump."""
    __slots__ = ("_collector", "config", "adapter", "commit", "save", "finish")

    def __init__(self, collector: "DumpCollector") -> None:
        self._collector = collector
        self.config, self.adapter = collector.config, collector.adapter
        self.commit, self.save, self.finish = collector.commit, collector.save_tensor_file, collector.finish

    @property
    def current_step(self) -> int:
        return self._collector.current_step

    @property
    def rank(self) -> Optional[int]:
        return self._collector.rank

    def resolve(self) -> None:
        """Fill the statistics still pending (on the device) into every descriptor of this step."""
        self._collector.records.resolve()

    def write_snapshot(self, snapshot: Any, file_name: str) -> None:
        """Write a snapshot the task already took (`adapter.copy_for_save`) as this step's `file_name`."""
        collector = self._collector
        collector.writer.save_tensor(collector.current_step, collector.rank, snapshot, file_name)


class DumpCollector:
    """Collects one rank's dump for a DebuggerConfig through a framework adapter."""

    def __init__(self, config: Any, adapter: Any, stack_capture: Optional[StackCapture] = None) -> None:
        self.config = config
        self.adapter = adapter
        self.task_name = config.task
        self.level = config.level
        task_class = task_for(config)
        self.filter = CallFilter(config, select=not task_class.selects_calls)
        self.guard = DumpGuard()  # hooks report their failures here (the user's call goes on)
        self.writer = DumpWriter(config.dump_path, adapter.save_tensor)
        self.tensor_files = TensorFiles(adapter, self.writer)
        self.stack_capture = stack_capture or StackCapture()
        self._tensor_class = getattr(adapter, "tensor_class", None)
        self.active = False
        self.finished = False  # the task ended the dump (overflow_nums reached)
        wants = config.wants  # data_mode, resolved once: these are asked on every call
        self.want_forward_input = wants("forward", "input")
        self.want_forward_output = wants("forward", "output")
        self.want_backward_input = wants("backward", "input")
        self.want_backward_output = wants("backward", "output")
        if not task_class.describes_calls:  # e.g. free_benchmark: no dump.json, calls are only routed to it
            self.want_forward_input = self.want_forward_output = False
            self.want_backward_input = self.want_backward_output = False
        self.current_step = 0
        self.rank: Optional[int] = None
        context: TaskContext = CollectorContext(self)
        self.task: Task = task_class(context)
        # routing decided once: a task that does not look at calls costs nothing per call
        self._task_before = type(self.task).before_call is not Task.before_call
        self._task_after = type(self.task).after_call is not Task.after_call
        self._task_admits_all = type(self.task).admit is Task.admit  # then records go straight in, unwrapped
        self._keeps_tensors = self.task.tensor_seen is not None
        # RNG audit (rng_audit.py): the random state each random call starts from, in fingerprint dumps
        self._random_state = adapter.random_state if config.summary_mode == "xor" else None
        if getattr(config, "async_dump", False):
            logger.warning("config: async_dump has no effect: msprobe always keeps a step's statistics until the "
                           "step ends and writes every file off the training thread.")
        self._reset_step()
        atexit.register(self._flush_at_exit)

    # -- lifecycle --------------------------------------------------------------------------
    def _reset_step(self):
        previous = getattr(self, "records", None)
        if previous is not None:  # its statistics are in the handed-over files: freed now, not by a later collection
            previous.release()
        self.records = RecordBuilder(self.adapter, self.config.summary_mode, on_tensor=self.task.tensor_seen)
        self.counters = {}
        self.data = {}
        self.stacks = {}
        self.construct = {}
        self.debug_data = {}
        self.compiled_regions: Dict[str, Any] = {}  # module name -> what of a compiled region was (not) observed
        self.module_stack: List[Any] = []  # ForwardCalls of the modules we are in, and Regions
        self.tensor_files.new_step()
        self.dirty = False
        self._params_grads = False  # a "parameters_grad" entry is in data (flush drops its ungraded parameters)
        self.filter.reset()
        self.task.new_step()

    def step_enabled(self):
        """Whether the current step and rank are selected (and the task has not ended the dump)."""
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

    def finish(self, message: str) -> None:
        """The task ends the dump for good (e.g. overflow_nums reached): write what was kept, stop."""
        self.finished = True
        self.flush()
        self.active = False
        logger.info(message)

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
        return self.finished or bool(self.config.step and self.current_step > self.config.step.max())

    # -- forward ----------------------------------------------------------------------------
    def begin_forward(self, key: str, args: Any, kwargs: Optional[dict], is_module: bool = False) -> ForwardCall:
        """Name the call, decide whether it is dumped, describe its inputs (before in-place ops)."""
        index = self.counters.get(key, 0)
        self.counters[key] = index + 1
        call = ForwardCall(key, index, is_module, self.module_stack[-1] if self.module_stack else None,
                           self.current_step, self._keeps_tensors)
        call_filter = self.filter
        call.dump = dump = True if call_filter.unfiltered else call_filter.enter(call)
        if is_module:
            self.module_stack.append(call)
            call.list_matched = call_filter.list_matches(call)
        if dump:
            call.stack = self.stack_capture.capture(2)
            if self.want_forward_input:
                records = self.records
                self.task.sink = call.tensors
                entry = call.entry
                stem = None if records.on_tensor is None else f"{call.name}.input"  # file stems: tasks that save
                entry["input_args"] = records.describe_args(args, stem)
                entry["input_kwargs"] = records.describe_kwargs(kwargs, stem) if kwargs else {}
            if self._random_state is not None and is_random_call(key):
                state = self._random_state()
                if state is not None:
                    call.entry["rng"] = state
            if self._task_before:
                self.task.before_call(call, args, kwargs)
        return call

    def enter_region(self, name: str) -> None:
        """Calls from now on get the parent `name` in construct.json (e.g. "optimizer"), until leave_region."""
        self.module_stack.append(Region(name))

    def leave_region(self, name: str) -> None:
        stack = self.module_stack
        if stack and isinstance(stack[-1], Region) and stack[-1].name == name:
            stack.pop()

    def abandon_forward(self, call: ForwardCall) -> None:
        """The call raised: close a module's call without recording it."""
        if call.is_module:
            if self.module_stack and self.module_stack[-1] is call:
                self.module_stack.pop()
            self.filter.leave(call, call.list_matched)

    def end_forward(self, call: ForwardCall, output: Any, parameters: Optional[dict] = None) -> Any:
        """Describe the outputs (and a module's own parameters) and hand the forward record to the task.
        Returns the output the caller should pass on (a task may replace it; usually `output` itself)."""
        if call.is_module:
            if self.module_stack and self.module_stack[-1] is call:
                self.module_stack.pop()
            self.filter.leave(call, call.list_matched)
        if not call.dump or not self.active:
            return output
        if self._task_after:
            output = self.task.after_call(call, output)
        entry = call.entry
        self.task.sink = call.tensors
        if self.want_forward_output:
            records = self.records
            if records.on_tensor is not None:  # file stems: tasks that save
                entry["output"] = records.describe_output(output, f"{call.name}.output")
            elif self._tensor_class is not None and isinstance(output, self._tensor_class):  # most calls
                entry["output"] = (records.describe_tensor(output),)
            else:
                entry["output"] = records.describe_output(output, None)
        if parameters is not None and (self.want_forward_input or self.want_forward_output):
            entry["parameters"] = {str(k): self.records.describe(v, f"{call.name}.parameters.{k}")
                                   for k, v in parameters.items()}
        if entry:  # data_mode without forward data: no forward entry (only its backward)
            if self._task_admits_all:  # _commit_entry, inlined: it runs for every recorded call
                name = call.name
                self.data[name] = entry
                if call.stack is not None:
                    self.stacks[name] = call.stack
                if self.level != "L1":
                    self.construct[name] = call.parent
                self.dirty = True
            else:
                self._offer(Record("forward", call.name, entry, call.parent, call.stack, call, call.tensors))
        if call.is_module and parameters and self.want_backward_output:
            grad_name = f"{call.key}.{PARAMS_GRAD}"
            if grad_name not in self.data:
                self.data[grad_name] = {str(k): None for k in parameters}
                self._params_grads = True
        return output

    def tensors_written(self, values):
        """Tensors an op has just written in place, before their version counters move (see RecordBuilder.written)."""
        for tensor in self._tensors_in(values):
            self.records.written(tensor)

    def tensors_changed(self, values):
        """Tensors (or lists of them) written in place without a version bump (e.g. by collectives)."""
        for tensor in self._tensors_in(values):
            self.records.forget(tensor)
            self.tensor_files.forget(tensor)

    def _tensors_in(self, values):
        for value in values:
            if isinstance(value, (list, tuple)):
                yield from self._tensors_in(value)
            elif self.adapter.is_tensor(value):
                yield value

    # -- backward ---------------------------------------------------------------------------
    def backward(self, call: ForwardCall, grads_of_outputs: Any, grads_of_inputs: Any) -> None:
        """Commit a backward entry: `input` = grads w.r.t. forward outputs, `output` = grads
        w.r.t. forward inputs (None where an input has no grad)."""
        if not call.dump or not self.active or call.step != self.current_step:
            return
        name = call.backward_name
        entry = {}
        tensors: Any = [] if self._keeps_tensors else ()
        self.task.sink = tensors
        records = self.records
        stem = None if records.on_tensor is None else name  # file stems: tasks that save
        if self.want_backward_input:
            entry["input"] = records.describe_args(grads_of_outputs, stem and f"{stem}.input")
        if self.want_backward_output:
            entry["output"] = records.describe_args(grads_of_inputs, stem and f"{stem}.output")
        if entry:
            if self._task_admits_all:  # what commit() does with it, without the Record
                self._commit_entry(name, entry, call.parent_backward, None)
            else:
                self._offer(Record("backward", name, entry, call.parent_backward, None, call, tensors))

    def parameters_grad(self, module_key: str, param_name: str, grad: Any) -> None:
        """Record the gradient of one parameter of a dumped module ("{key}.parameters_grad")."""
        name = f"{module_key}.{PARAMS_GRAD}"
        current = self.data.get(name)
        if not self.active or current is None or param_name not in current:
            return
        tensors: List[tuple] = []
        self.task.sink = tensors
        desc = self.records.describe(grad, f"{name}.{param_name}")
        self._offer(Record(PARAMS_GRAD, name, desc, tensors=tensors, param_name=param_name))

    # -- debugger.save ----------------------------------------------------------------------
    def save_variable(self, name, value, index=None):
        """debugger.save: an arbitrary value as "{name}.{index}.debug" in debug.json; returns index."""
        if not self.active:
            return None
        if index is None:
            index = self.counters.get(("debug", name), 0)
            self.counters[("debug", name)] = index + 1
        entry_name = f"{name}.{index}.debug"
        saves = self.task.saves_tensors
        self.records.on_tensor = self._save_debug_tensor if saves else None  # debug values: always kept
        try:
            self.debug_data[entry_name] = self.records.describe(value, entry_name)
        finally:
            self.records.on_tensor = self.task.tensor_seen
        self.dirty = True
        return index

    def _save_debug_tensor(self, tensor, file_name, desc):
        desc["data_name"] = file_name
        self.save_tensor_file(tensor, file_name)

    # -- records ----------------------------------------------------------------------------
    def _offer(self, record):
        if self.task.admit(record):
            self.commit(record)

    def commit(self, record: Record) -> None:
        """Put a record into the step's files (tasks call this for records they held back)."""
        if record.kind == PARAMS_GRAD:
            self._params_grads = True
            current = self.data.get(record.name) or {}
            # replace, never mutate: the writer may hold the previous dict
            self.data[record.name] = {**current, record.param_name: (record.entry,)}
        else:
            self._commit_entry(record.name, record.entry, record.parent, record.stack)
        self.dirty = True

    def _commit_entry(self, name, entry, parent, stack):
        self.data[name] = entry
        if stack is not None:
            self.stacks[name] = stack
        if self.level != "L1":
            self.construct[name] = parent
        self.dirty = True

    def note_compiled_region(self, note: Dict[str, Any]) -> None:
        """A compiled region ran in this step: dump.json says under "compiled_regions" what was observed."""
        if note["module"] not in self.compiled_regions:
            self.compiled_regions[note["module"]] = note
            self.dirty = True

    def save_tensor_file(self, tensor: Any, file_name: str) -> None:
        """Snapshot `tensor` now and write it as dump_tensor_data/`file_name` of this step."""
        self.tensor_files.save(tensor, file_name, self.current_step, self.rank)

    # -- output -----------------------------------------------------------------------------
    def dump_data_dir(self):
        if not self.task.saves_tensors:
            return None
        return os.path.join(self.config.dump_path, f"step{self.current_step}", rank_dir_name(self.rank),
                            TENSOR_DIR)

    def flush(self):
        """Resolve statistics and hand the step's JSON files to the writer (if anything changed)."""
        self.task.step_end()
        if not self.dirty:
            return
        self.records.resolve()
        if not self._params_grads:  # a copy: a later window of this step adds to self.data
            data = dict(self.data)
        else:
            data = {}
            for name, entry in self.data.items():
                if name.endswith(PARAMS_GRAD):
                    entry = {k: v for k, v in entry.items() if v is not None}
                    if not entry:
                        continue
                data[name] = entry
        task, framework, data_dir = self.task_name, self.adapter.framework, self.dump_data_dir()
        files = {"dump.json": {"task": task, "level": self.level, "framework": framework,
                               "dump_data_dir": data_dir, "data": data},
                 "stack.json": dict(self.stacks),
                 "construct.json": dict(self.construct)}
        if self.compiled_regions:  # a key beside 1.2.1's: readers of the 1.2.1 layout ignore it
            files["dump.json"]["compiled_regions"] = list(self.compiled_regions.values())
        if self.records.placed:  # DTensors: their placements beside dump.json (compare --layout auto)
            files["layout.json"] = {"framework": framework, **layout_mirror(data, self.records.placed)}
        if self.debug_data:
            files["debug.json"] = {"task": task, "level": "debug", "framework": framework,
                                   "dump_data_dir": data_dir, "data": dict(self.debug_data)}
        # the step's tensor files, then these: written while the next step runs (the writer waits here
        # only while the previous step is still unwritten)
        self.writer.write_json(self.current_step, self.rank, files,
                               finite=("dump.json", "debug.json") if self.records.finite else ())
        self.dirty = False
