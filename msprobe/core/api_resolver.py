"""Turn a dumped or received API name into a callable, only through an allow-list of the APIs the dump wraps.

A name in a dump.json, a config_op.json or a message is data: walking its dots as attributes would reach
anything (`Torch.os.system`, `Mint.mindspore.log.os.system`, `Tensor.__class__.__init__.__globals__`). So
no name is ever walked. Each framework adapter builds an `ApiAllowList` from the same API tables its dump
hooks wrap (PyTorch: `msprobe.pytorch.dump.api_names.api_allow_list`, MindSpore:
`msprobe.mindspore.dump.api_registry.api_allow_list`) and `resolve` looks the name up in it, key by key:

    >>> import builtins
    >>> allow = ApiAllowList("demo", {"Functional": {"relu": (builtins, "abs")}})
    >>> resolve(allow, "Functional", "relu") is abs
    True

A name outside the list (module hops, dunder chains, save/load/open, unknown prefixes, very long or
non-ASCII names) raises `ApiNameRefused` with one line: run_ut and friends show it as that API's SKIP
row, op_generate as its `[ERROR]` line. A listed callable may still be refused by the framework's
`refusal` (an effect outside tensors in its operator schema or signature: `Aten.from_file`). run_ut,
multi_run_ut, run_overflow_check, op_generate, online run_ut's bench and online_dispatch all resolve here.
"""
from collections.abc import Mapping
from typing import Callable, Dict, NoReturn, Optional, Tuple

from msprobe.core.errors import ConfigError, UnsupportedError
from msprobe.core.log import logger
from msprobe.core.naming import MAX_API_NAME_LEN, EntryName, check_api_name, is_api_name

__all__ = ["ApiNameRefused", "ApiAllowList", "resolve", "resolve_entry", "shown_name", "in_framework",
           "PATH_PARAMETER_WORDS", "MAX_MADE_ELEMENTS"]

# The replay rule both frameworks apply (docs/security.md): a parameter named like a file name or path makes an
# API's effect reach outside tensors (each adapter adds its own handle words to this pattern) ...
PATH_PARAMETER_WORDS = r"file|path|dir|folder|shared|^f$|fname"
# ... and no replayed call makes a tensor over this many elements beyond its largest input (1 GiB of float32;
# run_ut holds ~34 bytes per output element with the float64 bench and the comparison arrays)
MAX_MADE_ELEMENTS = 1 << 28


class ApiNameRefused(UnsupportedError):
    """A name that is not an API of the framework's allow-list: nothing was looked up or run."""


def shown_name(name, limit=80) -> str:
    """A name as it may be printed: one line, at most `limit` characters, non-ASCII escaped."""
    text = ascii(str(name))[1:-1]
    return text if len(text) <= limit else text[:limit - 3] + "..."


def in_framework(obj, module_roots: Tuple[str, ...]) -> bool:
    """Whether a callable found by listing a framework namespace (dir(torch.nn.functional)) belongs to it:
    re-exports such as typing.Optional do not. C method descriptors carry no module and pass."""
    module = getattr(obj, "__module__", None)
    if not isinstance(module, str):
        return True
    return any(module == root or module.startswith(root + ".") for root in module_roots)


class ApiAllowList:
    """{prefix: {api: (owner, attribute)}} of one framework: where each API the dump wraps lives. The pairs
    come from msprobe's own API tables, never from a name; the attribute is read at lookup time, so a
    function the user's process patched (torch.tanh replaced by a wrapper) is the one run, as a direct
    call would run it. A table may be any Mapping (a lazy one serves the thousands of ATen overloads)."""

    def __init__(self, framework: str, tables: Dict[str, Mapping], version: str = "",
                 refusal: Optional[Callable[[Callable], str]] = None):
        self.framework = framework
        self.tables = dict(tables)
        self.version = version
        # the framework's reason a listed callable may still not be replayed ('' when it may): an effect
        # outside tensors found in its operator schema (Aten.from_file); see docs/security.md
        self.refusal = refusal

    def lookup(self, prefix: str, api: str) -> Optional[Callable]:
        """The callable of prefix.api, or None when the list does not hold it."""
        table = self.tables.get(prefix)
        place = table.get(api) if table is not None else None
        if place is None:
            return None
        owner, attribute = place
        function = getattr(owner, attribute, None)
        return function if callable(function) else None

    def __contains__(self, name) -> bool:
        prefix, _, api = str(name).partition(".")
        return self.lookup(prefix, api) is not None


def _refuse(message: str, warn: bool) -> NoReturn:
    if warn:  # a run that goes on (run_ut's SKIP row) says it once on the terminal too
        logger.warning("msprobe: %s", message)
    raise ApiNameRefused(message)


def resolve(allow_list: ApiAllowList, prefix, api, warn=True) -> Callable:
    """The callable of `prefix.api` ('Functional', 'linear'), only from `allow_list`; anything else raises
    ApiNameRefused with one line (logged as a warning too unless `warn` is False: the caller prints it)."""
    name = f"{prefix}.{api}"
    if not isinstance(prefix, str) or not isinstance(api, str) or not is_api_name(f"{name}.0"):
        _refuse(f"API name '{shown_name(name)}' is refused: not an API name of letters, digits, '_' and "
                f"dots (at most {MAX_API_NAME_LEN} characters).", warn)
    function = allow_list.lookup(prefix, api)
    if function is None:
        version = f" {allow_list.version}" if allow_list.version else ""
        _refuse(f"{shown_name(name)} does not exist in msprobe's API list for {allow_list.framework}{version} "
                "(the APIs its dump wraps): refused, nothing was run.", warn)
    reason = allow_list.refusal(function) if allow_list.refusal is not None else ""
    if reason:
        _refuse(f"{shown_name(name)} is refused: {reason}; nothing was run.", warn)
    return function


def resolve_entry(allow_list: ApiAllowList, name, what="API name", warn=True) -> Tuple[EntryName, Callable]:
    """(parsed name, callable) of 'Functional.softmax.0' or 'Functional.softmax.0.forward'."""
    try:
        entry = check_api_name(name, what=what)
    except ConfigError as exc:  # outside the grammar: the same refusal, the same one line
        _refuse(str(exc), warn)
    return entry, resolve(allow_list, entry.prefix, entry.api, warn)
