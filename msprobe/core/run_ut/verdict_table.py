"""The terminal table of run_ut and api_precision_compare: the APIs that did not pass, worst first."""
from typing import Mapping, Optional

from msprobe.core.precision.output_check import ERROR, SKIP, WARNING
from msprobe.core.terminal import print_table

__all__ = ["print_api_verdicts"]

_ORDER = {ERROR: 0, WARNING: 1, SKIP: 2}
_STYLE = {ERROR: "red", WARNING: "yellow", SKIP: "dim"}


def print_api_verdicts(tool: str, statuses: Mapping[str, str], messages: Optional[Mapping[str, str]] = None,
                       top: int = 15) -> None:
    """Print up to `top` APIs whose status is error, warning or skip (errors first, in run order within a
    status) with their message; nothing when every API passed."""
    messages = messages or {}
    order = {api: n for n, api in enumerate(statuses)}
    failing = sorted((api for api, status in statuses.items() if status in _ORDER),
                     key=lambda api: (_ORDER[statuses[api]], order[api]))
    if not failing:
        return
    shown = failing[:top]
    print_table(f"{tool}: {len(failing)} of {len(statuses)} APIs did not pass"
                + (f" (first {len(shown)})" if len(shown) < len(failing) else ""),
                ["status", "API", "message"],
                [[statuses[api], api, " ".join(str(messages.get(api, "")).split())[:100]] for api in shown],
                styles=[_STYLE[statuses[api]] for api in shown])
