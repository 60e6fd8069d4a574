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
                                                 with `collector.commit(record)`
    step_end()                                   the step's files are about to be handed over
    saves_tensors                                whether dump.json names dump_tensor_data/

Defaults do the plain thing (no files, keep every record), and the collector only calls `before_call` /
`after_call` of a task that defines them, so a task pays for what it uses. A flight recorder, for example,
is one more module:

    @register_task("flight_recorder")
    class FlightRecorder(Task):
        '''Keeps the last `depth` records; writes them only when a non-finite value appears.'''
        def __init__(self, collector):
            super().__init__(collector)
            self.ring = collections.deque(maxlen=collector.config.section.get("depth", 64))
        def admit(self, record):
            self.ring.append(record)
            if has_non_finite(record.entry):
                for held in self.ring:
                    self.collector.commit(held)
                self.ring.clear()
            return False
"""
from typing import Any, Callable, Dict, List, Optional, Type

__all__ = ["Task", "Record", "register_task", "task_class", "task_for", "registered_tasks"]

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


class Task:
    """Base class: records every dumped call, saves no tensor files."""

    name = ""
    saves_tensors = False

    def __init__(self, collector: Any) -> None:
        self.collector = collector
        self.config = collector.config

    #: a method (tensor, file_name, desc) in tasks that want file names; None: descriptors get no file names
    tensor_seen: Optional[Callable[..., None]] = None
    #: the candidate list of the record being described (set by the collector before each description)
    sink: Optional[list] = None

    def before_call(self, call: Any, args: tuple, kwargs: dict) -> None:
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
    from msprobe.core.dump.tasks import overflow_check, statistics, tensor  # noqa: F401 - they register
    from msprobe.core.dump.tasks import flight_recorder, free_benchmark  # noqa: F401 - they register
    from msprobe.core.dump.tasks import online_run_ut  # noqa: F401 - it registers
    from msprobe.core.dump.tasks import baseline  # noqa: F401 - it registers


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
        return task_class("statistics_baseline")  # baseline mode (tasks/baseline.py)
    return task_class(config.task)


def registered_tasks() -> List[str]:
    _load_builtin_tasks()
    return sorted(_REGISTRY)
