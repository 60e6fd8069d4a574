"""Which calls get dumped: step, rank, scope, list and data_mode filters of config.json.

scope: [start, end] full names (API "Tensor.add.0.forward" or module "Module.fc.Linear.forward.0");
       everything from the start call to the end call is dumped (a module end includes its body).
list:  full names ("Functional.relu.3.forward", the direction is optional) or substrings ("relu");
       in mix level a module whose name matches is expanded: every call inside it is dumped.
"""
from msprobe.core.naming import call_of

__all__ = ["CallFilter"]

_strip_direction = call_of

class CallFilter:
    """Decides per forward call whether it is dumped. Stateful only for scope ranges."""

    def __init__(self, config):
        self.level = config.level
        self.scope = [_strip_direction(n) for n in config.scope]
        self.list_full = set()
        self.list_parts = []
        for item in config.list:
            if item.count(".") >= 2:
                self.list_full.add(_strip_direction(item))
            else:
                self.list_parts.append(item)
        self.unfiltered = not self.scope and not config.list
        self._in_scope = False
        self._scope_done = False
        self._scope_end_module = None
        self._expanded_modules = 0  # depth of list-matched modules we are inside

    def reset(self):
        self._in_scope = False
        self._scope_done = False
        self._scope_end_module = None
        self._expanded_modules = 0

    def _list_match(self, short_name):
        if short_name in self.list_full:
            return True
        return any(part in short_name for part in self.list_parts)

    def enter(self, forward_name, is_module):
        """Called when a forward call starts; returns whether to dump it."""
        if self.unfiltered:
            return True
        short = _strip_direction(forward_name)
        keep = False
        if self.scope:
            if not self._in_scope and not self._scope_done and short == self.scope[0]:
                self._in_scope = True
            keep = self._in_scope
            if self._in_scope and short == self.scope[1]:
                if is_module:
                    self._scope_end_module = short
                else:
                    self._in_scope = False
                    self._scope_done = True
        if self.list_full or self.list_parts:
            matched = self._list_match(short)
            if is_module and matched and self.level == "mix":
                self._expanded_modules += 1
            keep = keep or matched or self._expanded_modules > 0
        return keep

    def leave(self, forward_name, is_module, matched_list):
        """Called when a module's forward call ends (to close scope ranges and list expansions)."""
        if self.unfiltered or not is_module:
            return
        short = _strip_direction(forward_name)
        if self._scope_end_module == short:
            self._in_scope = False
            self._scope_done = True
            self._scope_end_module = None
        if matched_list and self.level == "mix" and self._expanded_modules > 0:
            self._expanded_modules -= 1

    def list_matches(self, forward_name):
        return bool(self.list_full or self.list_parts) and self._list_match(_strip_direction(forward_name))
