"""Names of monitored modules and parameters: 1.2.1's squashed form and target selection by prefix."""
import re

__all__ = ["squash_name", "select_targets"]

_SQUASH = [(re.compile(r"^(module\.)+"), ""), (re.compile(r"(^|\.)layers\.(\d+)"), r"\1\2")]


def squash_name(name: str) -> str:
    """Shorter names as 1.2.1 shows them: `module.layers.0.linear1` -> `0.linear1`."""
    for pattern, repl in _SQUASH:
        name = pattern.sub(repl, name)
    return name


def select_targets(names, targets: dict) -> dict:
    """name -> its target spec dict for each name equal to, or below, a configured target prefix ("" = all)."""
    chosen = {}
    for name in names:
        for prefix, spec in targets.items():
            if prefix == "" or name == prefix or name.startswith(prefix + "."):
                chosen[name] = spec
                break
    return chosen
