"""The shape a config_check pack's checks must have before they are compared; a malformed item is skipped.

A pack is read from a zip anyone may hand over: a weight that is not a fingerprint, a batch or seed call of the
wrong type, or a name holding a lone surrogate (which no report can encode) is dropped with one warning naming
the pack, the check and the item, and the rest of the pack is compared.
"""
from typing import Any, Callable, Dict, List

from msprobe.core.log import logger

__all__ = ["checked_pack"]


def _encodable(value: Any) -> bool:
    """Every string (key or value) under `value` encodes as UTF-8 (no lone surrogate)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return False
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return True


def _str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _fingerprint(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("shape"), list) \
        and isinstance(value.get("dtype"), str) and isinstance(value.get("sha256"), str)


def _batch(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("sha256"), str) \
        and isinstance(value.get("tensors"), list) \
        and all(isinstance(part, dict) and isinstance(part.get("path"), str) for part in value["tensors"])


def _seed(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("api"), str) and _str_list(value.get("args")) \
        and isinstance(value.get("kwargs"), dict) and all(isinstance(v, str) for v in value["kwargs"].values())


def _draw(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("calls", 0), int) \
        and isinstance(value.get("first_where", ""), str)


def _warn(path: str, check: str, item: str, what: str) -> None:
    shown = item.encode("utf-8", "backslashreplace").decode("ascii", "backslashreplace")[:120]
    logger.warning("%s: %s item '%s' is skipped: %s.", path, check, shown, what)


def _kept_dict(path: str, check: str, items: Dict[str, Any], valid: Callable[[Any], bool], what: str
               ) -> Dict[str, Any]:
    kept = {}
    for key, value in items.items():
        if not _encodable(key) or not _encodable(value):
            _warn(path, check, key, "it holds a lone surrogate (not UTF-8)")
        elif not valid(value):
            _warn(path, check, key, what)
        else:
            kept[key] = value
    return kept


def _kept_list(path: str, check: str, items: Any, valid: Callable[[Any], bool], what: str) -> List[Any]:
    if not isinstance(items, list):
        if items is not None:
            _warn(path, check, "(all)", "it is not a list")
        return []
    kept = []
    for n, value in enumerate(items):
        if not _encodable(value):
            _warn(path, check, str(n), "it holds a lone surrogate (not UTF-8)")
        elif not valid(value):
            _warn(path, check, str(n), what)
        else:
            kept.append(value)
    return kept


def checked_pack(pack: Dict[str, Any], path: str) -> Dict[str, Any]:
    """`pack` (every check already a dict) with its malformed items dropped, one warning each."""
    for check in ("framework", "packages", "environment", "hyperparameters"):
        pack[check] = _kept_dict(path, check, pack[check], lambda value: True, "")
    pack["weights"] = _kept_dict(path, "weights", pack["weights"], _fingerprint,
                                 "not a fingerprint (shape list, dtype and sha256 strings)")
    dataset, random_ = pack["dataset"], pack["random"]
    dataset["recorded"] = dataset.get("recorded") is True
    if "batches" in dataset:
        dataset["batches"] = _kept_list(path, "dataset batch", dataset["batches"], _batch,
                                        "not a batch (sha256 string, list of tensors with paths)")
    random_["recorded"] = random_.get("recorded") is True
    if "seeds" in random_:
        random_["seeds"] = _kept_list(path, "random seed call", random_["seeds"], _seed,
                                      "not a seed call (api string, args list and kwargs object of strings)")
    draws = random_.get("draws", {})
    if not isinstance(draws, dict):
        _warn(path, "random draws", "(all)", "it is not an object")
        draws = {}
    random_["draws"] = _kept_dict(path, "random draws", draws, _draw, "not a draw record (calls count)")
    return pack
