"""Dump tasks: what a dumped call records, which tensors it saves and which records it keeps.

One module per task, each a `Task` subclass registered by the name config.json gives it; the class
docstring is the task's configuration reference. The collector names calls, applies the filters and
builds the descriptors; at fixed points it asks the task:

    tensor_seen(tensor, file_name, desc)         each tensor described with a file name (inputs before the
                                                 call, outputs after it); set desc["data_name"] to save it,
                                                 or append it to `self.sink`, the record's candidates
    before_call(call, args, kwargs)              (a) a dumped call's inputs, before the framework runs it
    after_call(call, output) -> output           (a) its outputs; (d) return another object to replace the
                                                 output the user's code receives
    admit(record) -> bool                        (b) keep (True) or drop a finished record, having seen its
                                                 outputs; (c) a task may hold records and commit them later
                                                 with `self.context.commit(record)`
    step_end()                                   the step's files are about to be handed over
    saves_tensors                                whether dump.json names dump_tensor_data/

A task sees the collector only through its `TaskContext` (self.context): config, adapter, current_step,
rank, and commit(record), save(tensor, file_name), resolve() (fill statistics still on the device),
finish(message) (end the dump). The calls it gets carry their structured name (call.key, call.index,
call.is_module, call.name formatted once, call.entry_name). Routing is declared, not patched in:
`selects_calls` (the task picks calls itself: the scope/list filter passes all) and `describes_calls`
(False: no descriptors are built, calls are only routed to before_call/after_call).

A task also declares its config.json section: `config_fields` (a tuple of config_fields.Field: key, rule,
default, one-line doc), `levels` it accepts and the `frameworks` it runs on. core/config.py validates
from these declarations, and the packaged config.json, the reference in docs/config.md and
`msprobe -f pytorch config --explain TASK` are generated from them and from the class docstring, which
describes what the task does. The registry is the one list of tasks: run_ut and grad_probe, which do not
run in the collector, are entries too (`collects = False`), so their sections are declared the same way.

Defaults do the plain thing (no files, keep every record), and the collector only calls `before_call` /
`after_call` of a task that defines them, so a task pays for what it uses. A flight recorder, for example,
is one more module:

    @register_task("flight_recorder")
    class FlightRecorder(Task):
        '''Keeps the last `depth` records; writes them only when a non-finite value appears.'''
        config_fields = COMMON_FIELDS + (Field("depth", integer(1), 64, "records kept"),)
        def __init__(self, context):
            super().__init__(context)
            self.ring = collections.deque(maxlen=context.config.section["depth"])
        def admit(self, record):
            self.ring.append(record)
            if has_non_finite(record.entry):
                for held in self.ring:
                    self.context.commit(held)
                self.ring.clear()
            return False
"""
from typing import Any, Callable, Dict, List, Optional, Protocol, Tuple, Type

from msprobe.core.config_fields import Field

__all__ = ["Task", "TaskContext", "Record", "register_task", "task_class", "task_for", "registered_tasks", "config_tasks",
           "section_fields", "ALL_FRAMEWORKS", "ALL_LEVELS"]

ALL_FRAMEWORKS = ("pytorch", "mindspore")
ALL_LEVELS = ("L0", "L1", "L2", "mix")

_REGISTRY: Dict[str, Type["Task"]] = {}


class Record:
    """One finished entry of dump.json (or debug.json), before the task decides on it.

    kind: "forward", "backward", "parameters_grad" or "debug"; entry: the descriptors ({"input_args": ...,
    "output": ...}, or one parameter's gradient descriptor for "parameters_grad"); parent: the enclosing
    module's entry name (construct.json); stack: stack.json lines (forward only); call: the ForwardCall;
    tensors: candidates the task kept in `tensor_seen` ((tensor, file name, descriptor) triples).
    """
    __slots__ = ("kind", "name", "entry", "parent", "stack", "call", "tensors", "param_name")

    def __init__(self, kind: str, name: str, entry: Any, parent: Optional[str] = None, stack: Any = None,
                 call: Any = None, tensors: Optional[list] = None, param_name: Optional[str] = None) -> None:
        self.kind, self.name, self.entry, self.parent, self.stack = kind, name, entry, parent, stack
        self.call, self.param_name = call, param_name
        self.tensors: List[tuple] = tensors if tensors is not None else []


class TaskContext(Protocol):
    """What a task may use of the collector (collector.CollectorContext implements it)."""
    config: Any   # the DebuggerConfig; config.section is the task's validated section
    adapter: Any  # the framework's dump adapter (copy_for_save, tensor_stats, framework, ...)

    @property
    def current_step(self) -> int: ...

    @property
    def rank(self) -> Optional[int]: ...

    def commit(self, record: "Record") -> None:
        """Put a record into the step's files (one the task held back, or took over)."""

    def save(self, tensor: Any, file_name: str) -> None:
        """Snapshot `tensor` now and write it as dump_tensor_data/`file_name` of this step."""

    def write_snapshot(self, snapshot: Any, file_name: str) -> None:
        """Write a snapshot the task took itself (`adapter.copy_for_save`) as dump_tensor_data/`file_name`."""

    def resolve(self) -> None:
        """Fill statistics still pending (on the device) into this step's descriptors."""

    def finish(self, message: str) -> None:
        """End the dump for good (e.g. overflow_nums reached): write what was kept, stop collecting."""


class Task:
    """Base class: records every dumped call, saves no tensor files."""

    name = ""
    saves_tensors = False
    #: the keys of its config.json section; None: the task has no section of its own (not a config.json task)
    config_fields: Optional[Tuple[Field, ...]] = None
    #: the section it reads, when it is not its own (online_run_ut adds its keys to "tensor")
    section: Optional[str] = None
    #: config.json may name it as "task" (False: selected another way, e.g. tensor.online_run_ut)
    selectable = True
    #: it runs in the dump collector (False: run_ut and grad_probe have their own drivers)
    collects = True
    levels: Tuple[str, ...] = ALL_LEVELS
    frameworks: Tuple[str, ...] = ALL_FRAMEWORKS
    #: the task picks its calls itself (the collector's scope/list filter lets every call through)
    selects_calls = False
    #: the collector builds descriptors (dump.json entries); False: calls are only routed to the task
    describes_calls = True

    def __init__(self, context: TaskContext) -> None:
        self.context = context
        self.config = context.config

    @property
    def collector(self) -> TaskContext:
        """The task's context (the name tasks of wave 2 used; they get the context, not the collector)."""
        return self.context

    #: a method (tensor, file_name, desc) in tasks that want file names; None: descriptors get no file names
    tensor_seen: Optional[Callable[..., None]] = None
    #: the candidate list of the record being described (set by the collector before each description)
    sink: Optional[list] = None

    def before_call(self, call: Any, args: tuple, kwargs: Optional[dict]) -> None:
        """A dumped call's inputs (already described in call.entry), before the call runs."""

    def after_call(self, call: Any, output: Any) -> Any:
        """A dumped call's output, after it ran; the return value replaces the output."""
        return output

    def admit(self, record: Record) -> bool:
        """Whether the collector commits `record` now."""
        return True

    def step_end(self) -> None:
        """Called before the step's JSON files are handed to the writer."""

    def new_step(self) -> None:
        """Called when a new step begins."""


def register_task(name: str) -> Callable[[Type[Task]], Type[Task]]:
    """Class decorator: make a Task subclass the implementation of config task `name`."""
    def decorate(cls: Type[Task]) -> Type[Task]:
        cls.name = name
        _REGISTRY[name] = cls
        return cls
    return decorate


def _load_builtin_tasks() -> None:
    # in the order config.json and the docs list them
    from msprobe.core.dump.tasks import statistics, tensor, overflow_check, run_ut  # noqa: F401 - they register
    from msprobe.core.dump.tasks import free_benchmark, grad_probe, flight_recorder  # noqa: F401 - they register
    from msprobe.core.dump.tasks import online_run_ut  # noqa: F401 - it registers
    from msprobe.core.dump.tasks import baseline, tensor_list  # noqa: F401 - they register


def task_class(name: str) -> Type[Task]:
    """The registered class of task `name` (KeyError naming the known tasks otherwise)."""
    _load_builtin_tasks()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"no dump task '{name}'; registered: {sorted(_REGISTRY)}") from None


def task_for(config: Any) -> Type[Task]:
    """The task class a DebuggerConfig selects. 1.2.1 spells online run_ut as task "tensor" with
    `"online_run_ut": true` (08.accuracy_checker_online_PyTorch.md), which selects the online_run_ut task."""
    if config.task == "tensor" and config.section.get("online_run_ut"):
        return task_class("online_run_ut")
    if config.task == "statistics" and config.section.get("bench_path"):
        if config.section.get("tensor_list"):
            from msprobe.core.errors import ConfigError
            raise ConfigError("config: statistics.tensor_list and statistics.bench_path (baseline mode) each choose "
                              "which tensors to save; set one of them.")
        return task_class("statistics_baseline")  # baseline mode (tasks/baseline.py)
    if config.task == "statistics" and config.section.get("tensor_list"):
        return task_class("statistics_tensor_list")  # tasks/tensor_list.py
    return task_class(config.task)


def registered_tasks() -> List[str]:
    _load_builtin_tasks()
    return sorted(_REGISTRY)


def config_tasks(shipped_only: bool = False) -> List[Type[Task]]:
    """The tasks config.json may name, in registration order; `shipped_only`: those of msprobe itself (the
    packaged config.json and docs/config.md are generated from these, whatever tests register)."""
    _load_builtin_tasks()
    return [cls for cls in _REGISTRY.values() if cls.config_fields is not None and cls.selectable
            and (not shipped_only or cls.__module__.startswith("msprobe."))]


def section_fields(section: str) -> Tuple[Field, ...]:
    """The keys of config.json section `section`: its task's, then those other tasks add to it."""
    _load_builtin_tasks()
    owner = _REGISTRY.get(section)
    fields = tuple(owner.config_fields or ()) if owner is not None else ()
    for cls in _REGISTRY.values():
        if cls.section == section and cls is not owner:
            fields += tuple(cls.config_fields or ())
    return fields
