"""One hook lifecycle: every hook of a start()..stop() window is installed through a `HookSession`.

A session keeps an `ExitStack` of undo actions. Each install step registers how to undo itself at once,
so a failing install rolls back whatever was installed before it, and `close()` leaves the framework
exactly as it was (hooks removed, patched attributes restored, modes exited) in reverse order::

    session = HookSession()
    with session.installing():                       # an exception here undoes the earlier steps
        session.add_handle(module.register_forward_hook(hook))      # anything with .remove()
        session.enter(SomeTorchFunctionMode())                      # a context manager
        session.patch(primitive_class, "__call__", wrapped_call)    # setattr, restored on close
        session.callback(cleanup_fn, arg)                           # any undo action
    ...
    session.close()                                  # idempotent

`Reentrancy` is the one guard against our own work being recorded: hooks run their bookkeeping inside
`with guard.inside():` and skip recording while `guard.active` (per thread).

`fewer_collections(session)` raises the garbage collector's youngest threshold for the window: a dumped step
allocates thousands of containers (records, gradient bookkeeping) that live until the step's files are
handed over, so at the default threshold (700) the collector runs young collections ~10 times a step and
promotes the survivors until a full collection scans the whole heap (a 4-layer Llama: one in five steps,
costing more than a step of training). Closing the session restores the thresholds.
"""
import contextlib
import gc
import threading
from typing import Any, Callable, ContextManager, Iterator

__all__ = ["HookSession", "Reentrancy", "CollectWindow", "fewer_collections"]

_MISSING = object()


class HookSession:
    """Undo actions of installed hooks, run in reverse order by `close()` (or on a failed install)."""

    def __init__(self) -> None:
        self._stack = contextlib.ExitStack()
        self.closed = False

    def callback(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        """Register an undo action."""
        self._stack.callback(fn, *args, **kwargs)

    def add_handle(self, handle: Any) -> Any:
        """Register a handle with a `.remove()` method (torch RemovableHandle, MindSpore hook handles)."""
        self._stack.callback(handle.remove)
        return handle

    def enter(self, manager: ContextManager[Any]) -> Any:
        """Enter a context manager now and exit it at close."""
        return self._stack.enter_context(manager)

    def patch(self, owner: Any, name: str, value: Any) -> None:
        """setattr(owner, name, value) now; the previous attribute (or its absence) comes back at close."""
        previous = owner.__dict__.get(name, _MISSING) if isinstance(owner, type) else getattr(owner, name, _MISSING)
        setattr(owner, name, value)
        if previous is _MISSING:
            self._stack.callback(delattr, owner, name)
        else:
            self._stack.callback(setattr, owner, name, previous)

    @contextlib.contextmanager
    def installing(self) -> Iterator["HookSession"]:
        """Install steps inside this block: if one raises, everything installed so far is undone."""
        try:
            yield self
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Undo every install step, last first. Safe to call twice."""
        if self.closed:
            return
        self.closed = True
        self._stack.close()


YOUNG_THRESHOLD = 50_000  # container allocations between young collections while a dump window is open


def fewer_collections(session: HookSession, young: int = YOUNG_THRESHOLD) -> None:
    """Raise gc's youngest threshold to `young` until `session` closes (nothing when gc is off or the
    threshold is higher already); a threshold the user set meanwhile is left as it is."""
    before = gc.get_threshold()
    if not gc.isenabled() or not before[0] or before[0] >= young:
        return
    raised = (young,) + tuple(before[1:])
    gc.set_threshold(*raised)

    def restore() -> None:
        if gc.get_threshold() == raised:
            gc.set_threshold(*before)

    session.callback(restore)


class Reentrancy:
    """Per-thread depth counter: `active` is True while our own code runs inside a hook."""

    def __init__(self) -> None:
        self._local = threading.local()

    @property
    def active(self) -> bool:
        return getattr(self._local, "depth", 0) > 0

    @contextlib.contextmanager
    def inside(self) -> Iterator[None]:
        self.enter()
        try:
            yield
        finally:
            self.leave()

    # enter/leave: for hooks that pair them in a context-manager class of their own (cheaper per call
    # than a generator-based context manager)
    def enter(self) -> None:
        local = self._local
        local.depth = getattr(local, "depth", 0) + 1

    def leave(self) -> None:
        self._local.depth -= 1


class CollectWindow:
    """Mixin of the debuggers: `with debugger.collect(model): ...` dumps the block.

    start(model) on entry, stop() on exit, also when the block raises; call step() after it at the end of
    each training step, as with start/stop."""

    start: Callable[..., None]  # provided by the debugger class
    stop: Callable[[], None]

    @contextlib.contextmanager
    def collect(self, model: Any = None) -> Iterator[Any]:
        self.start(model)
        try:
            yield self
        finally:
            self.stop()
