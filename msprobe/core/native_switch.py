"""The one switch of msprobe's optional C extensions: `MSPROBE_NATIVE_STATS=0` turns every C path off (statistics,
the dump's walks and JSON layout, the grad tracker's walks, the compare kernels), each giving way to its Python or
framework reference, which produces the same results. Modules ask once, at import."""
import os

__all__ = ["native_enabled"]


def native_enabled() -> bool:
    """Whether the C paths may be used (the environment does not say MSPROBE_NATIVE_STATS=0)."""
    return os.environ.get("MSPROBE_NATIVE_STATS", "1") != "0"
