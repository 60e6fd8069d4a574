"""msprobe's optional C kernels, one package with one interface version.

Kernels only: each takes buffers (an address from `data_ptr()` / `ndarray.ctypes.data`, an element count and an
element kind: 4 float32, 8 float64, `FLOAT16`, `BFLOAT16`) or plain Python numbers, strings and tuples, and returns
numbers or bytes. None reads or writes a Python object's internals or another module's state, and none is a copy of
a Python method: every kernel has a Python or framework reference that gives the same results, which is what runs
when the extension was not built (no C compiler at install time), when `MSPROBE_NATIVE_STATS=0`, or when a built
module's `VERSION` is not this package's (an old build left in place).

- `_stats` (`_stats.c`): the dump's statistics (max, min, mean, norm in one pass), grad_probe's bucket pass, the
  "xor" fingerprint, their strided forms, the thread pool for long buffers. Read through `core/dump/native.py`.
- `_pair` (`_pair.c`): the pair metrics of online_dispatch (`judge_pair`) and the number formatting of compare's
  reports. Read through `core/io/float_text.py` and `pytorch/online_dispatch/single_benchmark.py`.

docs/architecture.md ("Native kernels") lists every function with its Python reference.
"""
import importlib
import os

__all__ = ["VERSION", "enabled", "load"]

#: the interface version the Python side expects (MSPROBE_NATIVE_VERSION in common.h)
VERSION = 5

_loaded = {}


def enabled() -> bool:
    """Whether the C kernels may be used (the environment does not say MSPROBE_NATIVE_STATS=0)."""
    return os.environ.get("MSPROBE_NATIVE_STATS", "1") != "0"


def load(name):
    """The built kernel module `msprobe._native.<name>`, or None: not built, switched off, failing to load or of
    another version (the last two said once in a warning: the Python paths serve)."""
    if not enabled():
        return None
    if name in _loaded:
        return _loaded[name]
    module = None
    try:
        module = importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError:  # built without a compiler: the Python and framework paths serve
        pass
    except ImportError as exc:
        _warn(f"the C kernels '{name}' are built but do not load ({exc})")
    if module is not None and getattr(module, "VERSION", None) != VERSION:
        _warn(f"the C kernels '{name}' are of another version ({getattr(module, 'VERSION', None)}, not {VERSION})")
        module = None
    _loaded[name] = module
    return module


def _warn(what):
    from msprobe.core.log import logger

    logger.warning("%s; msprobe uses its Python and framework paths, which give the same results. Reinstall msprobe "
                   "to rebuild them.", what)
