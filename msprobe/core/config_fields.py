"""Config keys as data: a `Field` (name, rule, default, one-line doc) and the rules that validate values.

Task modules declare their config.json section as a tuple of Fields (`Task.config_fields`); core/config.py
validates from those declarations, and the config reference (docs/config.md, `msprobe config --explain`)
and the packaged config.json are generated from them. A rule is a callable `rule(key, value) -> value`
raising ConfigError with the key, the bad value and what is allowed; `rule.allowed` says the same for the docs.
"""
from dataclasses import dataclass, replace
from typing import Any, Callable, Optional, Sequence, Tuple

from msprobe.core.errors import ConfigError
from msprobe.core.ranges import IndexRanges

__all__ = ["Field", "Effect", "Rule", "fail", "choice", "boolean", "integer", "string", "string_list", "scope",
           "data_mode", "summary_mode", "bounds", "ranges", "port", "DATA_MODES", "MS_SUMMARY_ITEMS",
           "COMMON_FIELDS", "SCOPE", "LIST", "DATA_MODE", "SUMMARY_MODE", "unlisted", "IGNORE_NON_FINITE",
           "RAISE_AT_PRODUCER", "ONLINE_FIELDS", "INTERPRET_COMPILED",
           "SHADOW_COMPILED"]

DATA_MODES = ("all", "forward", "backward", "input", "output")
MS_SUMMARY_ITEMS = ("max", "min", "mean", "l2norm")


def fail(key: str, value: Any, allowed: str) -> None:
    raise ConfigError(f"config: invalid value {value!r} for '{key}'; allowed: {allowed}.")


@dataclass(frozen=True)
class Rule:
    """A validator: `check(key, value)` returns the value to keep or raises ConfigError; `allowed` is the
    text of what passes (the error message and the docs both use it); `kind` the JSON type shown in docs."""
    check: Callable[[str, Any], Any]
    allowed: str
    kind: str

    def __call__(self, key: str, value: Any) -> Any:
        return self.check(key, value)


def choice(*options: str) -> Rule:
    allowed = " | ".join(repr(o) for o in options)

    def check(key: str, value: Any) -> Any:
        if value not in options:
            fail(key, value, allowed)
        return value
    return Rule(check, allowed, "str")


def _boolean(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if value in ("true", "false", "True", "False"):  # the reference docs show "if_preheat": "true"
        return value.lower() == "true"
    fail(key, value, "true | false")
    raise AssertionError  # unreachable: fail raises


boolean = Rule(_boolean, "true | false", "bool")


def integer(minimum: Optional[int] = None, allow: Sequence[int] = ()) -> Rule:
    extra = f" or {', '.join(map(str, allow))}" if allow else ""
    allowed = f"an integer >= {minimum}{extra}" if minimum is not None else "an integer"

    def check(key: str, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int) or (
                value not in allow and minimum is not None and value < minimum):
            fail(key, value, allowed)
        return value
    return Rule(check, allowed, "int")


def _string(key: str, value: Any) -> str:
    if not isinstance(value, str):
        fail(key, value, "a string")
    return value


string = Rule(_string, "a string", "str")


def _string_list(key: str, value: Any) -> list:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        fail(key, value, "a list of non-empty strings")
    return list(value)


string_list = Rule(_string_list, "a list of non-empty strings", "list")


def _scope(key: str, value: Any) -> list:
    value = _string_list(key, value)
    if len(value) not in (0, 2):
        fail(key, value, "an empty list or exactly two names [start, end]")
    return value


scope = Rule(_scope, "an empty list or exactly two names [start, end]", "list")


def _data_mode(key: str, value: Any) -> list:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or any(v not in DATA_MODES for v in value):
        fail(key, value, f"a non-empty list of {list(DATA_MODES)}")
    if "all" in value and len(value) > 1:
        fail(key, value, "['all'] alone, or a combination of forward/backward/input/output")
    return list(value)


data_mode = Rule(_data_mode, "['all'] or a combination of forward/backward and input/output", "list")


def _summary_mode(key: str, value: Any) -> Any:
    if isinstance(value, list):
        if not value or any(v not in MS_SUMMARY_ITEMS for v in value):
            fail(key, value, f"'statistics' | 'md5' | 'xor' | a list of {list(MS_SUMMARY_ITEMS)}")
        return list(value)
    return choice("statistics", "md5", "xor")(key, value)


summary_mode = Rule(_summary_mode, f"'statistics' | 'md5' | 'xor' | a list of {list(MS_SUMMARY_ITEMS)}",
                    "str or list")


def _bounds(key: str, value: Any) -> list:
    if (not isinstance(value, list) or len(value) < 1
            or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in value)
            or any(a >= b for a, b in zip(value, value[1:]))):
        fail(key, value, "a non-empty, strictly increasing list of numbers")
    return list(value)


bounds = Rule(_bounds, "a non-empty, strictly increasing list of numbers", "list")
ranges = Rule(IndexRanges.parse, "integers >= 0 and \"a-b\" ranges", "list")


def _port(key: str, value: Any) -> Any:
    if value == -1:
        return value
    value = integer(0)(key, value)
    if value > 65535:
        fail(key, value, "a port number 0-65535")
    return value


port = Rule(_port, "-1 (unset) or a port number 0-65535", "int")


@dataclass(frozen=True)
class Effect:
    """Where a key does something: `where` in words, `applies(framework, task, level, value)` -> bool. A key
    set to a non-default value where it does not apply gets one warning line when the config is loaded."""
    where: str
    applies: Callable[[str, str, str, Any], bool]


@dataclass(frozen=True)
class Field:
    """One key of a config.json section (or of the top level).

    listed: the key appears in the packaged config.json (1.2.1's default file lists a subset).
    """
    name: str
    rule: Rule
    default: Any
    doc: str
    listed: bool = True
    effect: Optional[Effect] = None


_SUMMARY_LIST_EFFECT = Effect("a list of items: MindSpore level L2 only",
                              lambda fw, task, level, value: not isinstance(value, list)
                              or (fw != "pytorch" and level == "L2"))

SCOPE = Field("scope", scope, [], "`[first, last]` entry names: dump only from the first to the last (inclusive)")
LIST = Field("list", string_list, [], "full entry names, API names (`\"relu\"` matches every name containing it) "
             "or, in `mix`, module names whose whole sub-tree is dumped")
DATA_MODE = Field("data_mode", data_mode, ["all"], "`all`, or any combination of `forward`/`backward` and "
                  "`input`/`output`")
SUMMARY_MODE = Field("summary_mode", summary_mode, "statistics",
                     "`statistics` (Max/Min/Mean/Norm), `md5` (adds the CRC-32 of each tensor) or `xor` (adds a "
                     "bitwise fingerprint and the RNG audit, docs/determinism.md); MindSpore graph "
                     "mode also accepts a list of `max`/`min`/`mean`/`l2norm`", effect=_SUMMARY_LIST_EFFECT)
INTERPRET_COMPILED = Field("interpret_compiled", boolean, False, "PyTorch L1/L2/mix: in a dump window, "
                           "torch.compile'd regions run their Dynamo graph node by node through torch.fx.Interpreter "
                           "(eager kernels), so every call inside is recorded under its eager name "
                           "([compile.md](compile.md))", listed=False,
                           effect=Effect("PyTorch levels L1, L2, mix", lambda fw, task, level, value:
                                         fw != "mindspore" and level in ("L1", "L2", "mix")))
SHADOW_COMPILED = Field("shadow_compiled", boolean, False, "PyTorch L0/mix: torch.compile'd regions run the user's "
                        "compiled graph (training bit-identical) and module inputs/outputs are recorded from a "
                        "second, no-grad forward compiled module by module; no module backward entries "
                        "([compile.md](compile.md))", listed=False,
                        effect=Effect("PyTorch levels L0, mix", lambda fw, task, level, value:
                                      fw != "mindspore" and level in ("L0", "mix")))
#: which calls a dumping task sees (core/dump/filters.py)
COMMON_FIELDS: Tuple[Field, ...] = (SCOPE, LIST, DATA_MODE, INTERPRET_COMPILED, SHADOW_COMPILED)


def unlisted(*fields: Field) -> Tuple[Field, ...]:
    """The same keys, left out of the packaged config.json (they keep their defaults there)."""
    return tuple(replace(f, listed=False) for f in fields)


#: the NaN-origin keys of overflow_check and flight_recorder (core/overflow/origin.py)
IGNORE_NON_FINITE = Field("ignore_non_finite", string_list, [], "expected infs/nans that are not findings, e.g. "
                          "`[\"masked_fill:-inf\"]` (see core/overflow/origin.py)", listed=False)
RAISE_AT_PRODUCER = Field("raise_at_producer", boolean, False, "raise NaNProducerError into the training code at "
                          "the first call that produces an inf/nan from finite inputs", listed=False)
#: how online run_ut reaches its bench side (tensor section on the dumping side, run_ut section on the bench side)
ONLINE_FIELDS: Tuple[Field, ...] = (
    Field("nfs_path", string, "", "shared directory (then host/port/tls_path are ignored)", listed=False),
    Field("host", string, "", "the bench side's address (TCP)", listed=False),
    Field("port", port, -1, "the bench side's port", listed=False),
    Field("tls_path", string, "./", "folder with the TLS key, certificate and ca.crt; `\"\"`: plain TCP", listed=False),
    Field("allow_plain_tcp", boolean, False, "`true`: plain TCP (no TLS) to or on a host other than loopback is "
          "meant; refused otherwise", listed=False),
)
