"""The one seam between core and a framework adapter: the `Framework` interface and `get_framework(name)`.

Core never imports an adapter package. Each adapter package `msprobe/<name>/` provides a module
`framework.py` with a `FRAMEWORK` object (a `Framework` subclass instance); core finds it by listing the
packages next to `core/` that hold such a file, the way the CLI finds `msprobe/<name>/commands/`, and
imports it by a name only known at run time::

    framework = get_framework(collector.adapter.framework)     # "pytorch" / "mindspore"
    ops = framework.perturbation_ops()                         # free_benchmark's FuzzOps class
    pack = framework.wire_packer()                             # online run_ut's tensor packing
    rank = current_rank(framework)                             # the one rule for "which rank am I"

Adding a framework: create `msprobe/<name>/framework.py` with `FRAMEWORK = <Name>Framework()` implementing
the abstract methods below (docs/architecture.md walks through it).
"""
import abc
import importlib
import os
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Dict, Optional, Protocol, Sequence, Tuple, Type

from msprobe.core.dump.adapter import DumpAdapter
from msprobe.core.dump.stack import StackCapture
from msprobe.core.errors import UnsupportedError
from msprobe.core.free_benchmark.fuzz_ops import FuzzOps

if TYPE_CHECKING:
    from msprobe.core.api_resolver import ApiAllowList
    from msprobe.core.config_check.probe import ConfigCheckProbe

__all__ = ["Framework", "DumpHooks", "WindowSession", "available_frameworks", "get_framework", "current_rank",
           "rank_from_environment", "FRAMEWORK_MODULE"]

#: the module an adapter package provides (msprobe/<name>/framework.py), holding `FRAMEWORK`
FRAMEWORK_MODULE = "framework"
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_PACKAGE, _CORE = __name__.split(".")[:2]  # "msprobe", "core": the adapters are core's sibling packages
_LOADED: Dict[str, "Framework"] = {}


class WindowSession(Protocol):
    """The hooks of one start()..stop() window (a core HookSession, or an object owning one)."""

    def close(self) -> None:
        """Remove every hook of the window, leaving the framework as it was before `open`."""


class DumpHooks(Protocol):
    """Hook installation of one debugger: `open` installs every hook of the dump level into a new session."""

    def open(self, models: Sequence[Any]) -> WindowSession:
        """Install the level's hooks (for `models`, when the level hooks modules/cells); a failing
        install undoes what it had installed before raising."""

    def add_model(self, session: WindowSession, model: Any) -> None:
        """Hook one more model into an open window (start(model) a second time in one step)."""

    def new_step(self) -> None:
        """The debugger moved to the next step (per-step hook state starts again)."""


class Framework(abc.ABC):
    """What core needs from a framework; one instance per adapter package (`FRAMEWORK`)."""

    #: the framework's name: the adapter package under msprobe/ and the "framework" key of dump.json
    name: ClassVar[str]
    #: environment variables read, in order, for the rank when the distributed runtime is not initialised
    rank_env_keys: ClassVar[Tuple[str, ...]] = ()
    #: "module:function" building run_ut's executor (imported where the APIs run); None: no run_ut
    run_ut_executor: ClassVar[Optional[str]] = None
    #: "module:function" building the online run_ut bench runner; None: no online run_ut bench side
    online_runner: ClassVar[Optional[str]] = None

    @abc.abstractmethod
    def dump_adapter(self) -> DumpAdapter:
        """The adapter that describes this framework's tensors to core/dump (see core/dump/adapter.py)."""

    def stack_capture(self) -> StackCapture:
        """The call-stack capture of dump.json's stack.json (frames of the framework's own files left out)."""
        return StackCapture()

    @abc.abstractmethod
    def dump_hooks(self, collector: Any, level: str) -> DumpHooks:
        """The hook installer of one debugger's `collector` at dump `level` (L0, L1, mix, L2)."""

    @abc.abstractmethod
    def distributed_rank(self) -> Optional[int]:
        """The rank from the framework's distributed runtime when it is initialised, else None."""

    @abc.abstractmethod
    def perturbation_ops(self) -> Type[FuzzOps]:
        """free_benchmark's tensor work for this framework (a FuzzOps subclass)."""

    def wire_packer(self) -> Optional[Callable[[Any, str], Tuple[Dict[str, Any], memoryview]]]:
        """`pack(snapshot, name) -> (blob meta, buffer)` of a tensor snapshot for the online run_ut wire
        (core/run_ut/online/wire.py); None when this framework has no online run_ut."""
        return None

    def api_allow_list(self) -> "ApiAllowList":
        """Where each API the dump wraps lives (core/api_resolver.py): the only way a name from a dump or a
        message becomes a callable."""
        raise UnsupportedError(f"framework '{self.name}' has no API allow-list.")

    def config_check_probe(self) -> "ConfigCheckProbe":
        """config_check's view of this framework (core/config_check/probe.py)."""
        raise UnsupportedError(f"framework '{self.name}' has no config_check support.")

    def replay_sizer(self) -> Optional[Callable[..., None]]:
        """`size(function, args, kwargs, api_name=...)`: raises an UnsupportedError (one line) unless the call
        reads and writes tensors only and makes no tensor over the cap, found without running it (PyTorch:
        its meta device); None when this framework cannot size a call before it runs."""
        return None


def available_frameworks() -> Tuple[str, ...]:
    """Sorted names of the adapter packages of this installation (without importing any of them)."""
    try:
        names = os.listdir(_PACKAGE_DIR)
    except OSError:
        return ()
    return tuple(sorted(name for name in names if name.isidentifier() and not name.startswith("_") and name != _CORE
                        and os.path.isfile(os.path.join(_PACKAGE_DIR, name, FRAMEWORK_MODULE + ".py"))))


def get_framework(name: str) -> Framework:
    """The `Framework` of adapter package `name`; UnsupportedError (one line) for an unknown name."""
    framework = _LOADED.get(name)
    if framework is not None:
        return framework
    known = available_frameworks()
    if name not in known:
        raise UnsupportedError(f"unknown framework {name!r}; this installation has: {', '.join(known) or 'none'}.")
    module = importlib.import_module(f"{_PACKAGE}.{name}.{FRAMEWORK_MODULE}")
    framework = getattr(module, "FRAMEWORK", None)
    if not isinstance(framework, Framework) or framework.name != name:
        raise UnsupportedError(f"framework {name!r}: its {FRAMEWORK_MODULE}.py must define FRAMEWORK, a Framework "
                               f"named {name!r}.")
    _LOADED[name] = framework
    return framework


def rank_from_environment(keys: Sequence[str]) -> Optional[int]:
    """The first of the environment variables `keys` that holds a non-negative integer, else None."""
    for key in keys:
        value = os.environ.get(key, "").strip()
        if value.isdigit():
            return int(value)
    return None


def current_rank(framework: Framework, default: Optional[int] = None) -> Optional[int]:
    """The process rank: the distributed runtime's when initialised, else the framework's launcher
    variables (MindSpore's msrun sets RANK_ID), else `default` (None: "not distributed", dump dir `rank`)."""
    rank = framework.distributed_rank()
    if rank is None:
        rank = rank_from_environment(framework.rank_env_keys)
    return default if rank is None else int(rank)
