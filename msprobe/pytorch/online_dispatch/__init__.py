"""Online accuracy check of ATen ops against a high-precision CPU re-run: `PtdbgDispatch`."""
from msprobe.pytorch.online_dispatch.dispatch import DUMP_MODES, PtdbgDispatch

__all__ = ["PtdbgDispatch", "DUMP_MODES"]
