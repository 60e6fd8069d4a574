"""One hook lifecycle: every hook of a start()..stop() window is installed through a `HookSession`.

A session keeps a list of undo actions. Each install step registers how to undo itself at once,
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
from typing import Any, Callable, ContextManager, Dict, Iterator, List, Tuple

__all__ = ["HookSession", "WrapperCache", "Reentrancy", "CollectWindow", "fewer_collections"]

_MISSING = object()
_NO_KEYWORDS: Dict[str, Any] = {}  # shared, never written


class HookSession:
    """Undo actions of installed hooks, run in reverse order by `close()` (or on a failed install)."""

    def __init__(self) -> None:
        # (function, arguments) run last first; a list, not an ExitStack: a dump window installs and undoes ~80
        # steps each start()/stop(), and ExitStack's wrapper per step cost ~60 us a window
        self._undo: List[Tuple[Callable[..., Any], Tuple[Any, ...], Dict[str, Any]]] = []
        self.closed = False

    def callback(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        """Register an undo action."""
        self._undo.append((fn, args, kwargs))

    def add_handle(self, handle: Any) -> Any:
        """Register a handle with a `.remove()` method (torch RemovableHandle, MindSpore hook handles)."""
        self._undo.append((handle.remove, (), _NO_KEYWORDS))
        return handle

    def enter(self, manager: ContextManager[Any]) -> Any:
        """Enter a context manager now and exit it (with no exception) at close."""
        kind = type(manager)
        exit_ = kind.__exit__
        result = kind.__enter__(manager)
        self._undo.append((exit_, (manager, None, None, None), _NO_KEYWORDS))
        return result

    def patch(self, owner: Any, name: str, value: Any) -> None:
        """setattr(owner, name, value) now; the previous attribute (or its absence) comes back at close."""
        previous = owner.__dict__.get(name, _MISSING) if isinstance(owner, type) else getattr(owner, name, _MISSING)
        setattr(owner, name, value)
        if previous is _MISSING:
            self._undo.append((delattr, (owner, name), _NO_KEYWORDS))
        else:
            self._undo.append((setattr, (owner, name, previous), _NO_KEYWORDS))

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
        undo, self._undo = self._undo, []
        error = None
        while undo:  # every step runs, also after one failed; the first failure is raised at the end
            fn, args, kwargs = undo.pop()
            try:
                fn(*args, **kwargs)
            except BaseException as exc:  # noqa: BLE001 - re-raised below, once the rest is undone
                if error is None:
                    error = exc
        if error is not None:
            raise error


class WrapperCache:
    """The wrappers a window patches in, built once a process: a window pays only its setattrs, and stop() puts the
    originals back as ever. A wrapper must find the window's state when it is called, not hold it."""

    def __init__(self) -> None:
        self._built: Dict[str, Tuple[Any, Any]] = {}  # name -> (the original, its wrapper)

    def get(self, name: str, original: Any, build: Callable[[str, Any], Any]) -> Any:
        """The wrapper of `original` under `name`: build(name, original) the first time, and again when something
        else replaced the attribute since."""
        built = self._built.get(name)
        if built is None or built[0] is not original:
            built = self._built[name] = (original, build(name, original))
        return built[1]


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
