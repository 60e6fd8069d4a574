"""A user's own script named on the command line (bisect, compile_check): run it, take the function it defines.

The script is the user's code and runs as their training would; what it raises, while loading or when its
function is called, becomes one error line naming the script, never a traceback. It runs as a real module,
`__msprobe_<function>__`, kept in `sys.modules` after loading: what it defines can be found again by its
`__module__` (MindSpore's jit parser imports a cell's module; pickle imports a class's).
"""
import importlib.util
import sys
from typing import Any, Callable, Type

from msprobe.core.errors import MsprobeError
from msprobe.core.paths import check_path

__all__ = ["load_script_function", "call_user_function"]


def _one_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"


def load_script_function(script: str, name: str, returns: str, error: Type[MsprobeError]) -> Callable[..., Any]:
    """The callable `name` of the script at `script`; `returns` says in messages what it must return."""
    script = check_path(script, kind="file", what="--script")
    module_name = f"__msprobe_{name}__"
    spec = importlib.util.spec_from_file_location(module_name, script)
    if spec is None or spec.loader is None:
        raise error(f"{script} cannot be loaded as a Python module.")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the user's script failed: say where, in one line
        sys.modules.pop(module_name, None)
        raise error(f"{script} failed while loading: {_one_line(exc)}") from None
    function = getattr(module, name, None)
    if not callable(function):
        raise error(f"{script} defines no function {name}() returning {returns}.")
    return function


def call_user_function(function: Callable[..., Any], what: str, error: Type[MsprobeError], *args: Any) -> Any:
    """function(*args); an exception of the user's code becomes one `error` line saying `what` failed."""
    try:
        return function(*args)
    except MsprobeError:
        raise
    except Exception as exc:  # the user's code, whatever it raises
        raise error(f"{what} failed: {_one_line(exc)}") from None
