"""Which calls get dumped: the scope, list and data_mode filters of config.json (step and rank: collector).

scope: [start, end] full names (API "Tensor.add.0.forward" or module "Module.fc.Linear.forward.0");
       everything from the start call to the end call is dumped (a module end includes its body).
list:  full names ("Functional.relu.3.forward", the direction is optional) or substrings ("relu");
       in mix level a module whose name matches is expanded: every call inside it is dumped.
risk_level (without scope and list, levels L1/mix): the APIs of that risk class (risk.py); modules are kept.

The filter reads the call's structured name (its key and call index, see collector.ForwardCall): the config's
names are parsed once here, and a call is never formatted and parsed back.
"""
from typing import Any, List, Optional, Protocol, Set

from msprobe.core.dump.risk import keeps
from msprobe.core.naming import call_of

__all__ = ["CallFilter", "CallName"]


class CallName(Protocol):
    """What the filter reads of a call (collector.ForwardCall provides it): `call_name` is the entry name
    without its direction ('Functional.relu.3', 'Module.fc.Linear.0'); `is_module`."""
    @property
    def call_name(self) -> str: ...

    @property
    def is_module(self) -> bool: ...


class CallFilter:
    """Decides per forward call whether it is dumped. Stateful only for scope ranges.

    select=False: a task that selects calls itself (free_benchmark) gets every call."""

    def __init__(self, config: Any, select: bool = True) -> None:
        self.level = config.level
        items = config.list if select else []
        self.scope: List[str] = [call_of(n) for n in config.scope] if select else []
        self.list_full: Set[str] = set()
        self.list_parts: List[str] = []
        for item in items:
            if item.count(".") >= 2:
                self.list_full.add(call_of(item))
            else:
                self.list_parts.append(item)
        # risk_level (core/dump/risk.py): APIs of levels L1/mix when neither scope nor list picks the calls
        risk = getattr(config, "risk_level", "ALL")
        self.risk_level = risk if select and risk != "ALL" and not self.scope and not items and \
            self.level in ("L1", "mix") else None
        self.unfiltered = not self.scope and not items and self.risk_level is None
        self._in_scope = False
        self._scope_done = False
        self._scope_end_module: Optional[Any] = None  # the module call that closes the scope when it returns
        self._expanded_modules = 0  # depth of list-matched modules we are inside

    def reset(self) -> None:
        self._in_scope = False
        self._scope_done = False
        self._scope_end_module = None
        self._expanded_modules = 0

    def _list_match(self, short_name: str) -> bool:
        if short_name in self.list_full:
            return True
        return any(part in short_name for part in self.list_parts)

    def enter(self, call: CallName) -> bool:
        """Called when a forward call starts; returns whether to dump it."""
        if self.unfiltered:
            return True
        short = call.call_name
        if self.risk_level is not None:
            return call.is_module or keeps(self.risk_level, short)
        keep = False
        if self.scope:
            if not self._in_scope and not self._scope_done and short == self.scope[0]:
                self._in_scope = True
            keep = self._in_scope
            if self._in_scope and short == self.scope[1]:
                if call.is_module:
                    self._scope_end_module = call
                else:
                    self._in_scope = False
                    self._scope_done = True
        if self.list_full or self.list_parts:
            matched = self._list_match(short)
            if call.is_module and matched and self.level == "mix":
                self._expanded_modules += 1
            keep = keep or matched or self._expanded_modules > 0
        return keep

    def leave(self, call: CallName, matched_list: bool) -> None:
        """Called when a module's forward call ends (to close scope ranges and list expansions)."""
        if self.unfiltered or not call.is_module:
            return
        if self._scope_end_module is call:
            self._in_scope = False
            self._scope_done = True
            self._scope_end_module = None
        if matched_list and self.level == "mix" and self._expanded_modules > 0:
            self._expanded_modules -= 1

    def list_matches(self, call: CallName) -> bool:
        return bool(self.list_full or self.list_parts) and self._list_match(call.call_name)
