"""MindSpore -> PyTorch entry names for cross-framework compare (the `entry_mapper` of core compare).

A pure name mapping (no framework imported): `msprobe -f mindspore compare` and the graph
visualisation both use it.

    mapper = ms_to_pt_entry_mapper(api_defaults=True, cells_to_modules=True)
    mapper("Mint.add.0.forward")            -> "Torch.add.0.forward"
    mapper("Mint.special.expm1.0.forward")  -> "Torch.special.expm1.0.forward"
    mapper("MintFunctional.relu.1.backward") -> "Functional.relu.1.backward"
    mapper("Functional.dense.0.forward")     -> "Functional.linear.0.forward"   (ms_to_pt_api.yaml)
    mapper("Primitive.dense.Dense.2.forward") -> "Functional.linear.2.forward"  (mint.nn.Linear)
    mapper("Cell.fc.Dense.forward.0")        -> "Module.fc.Dense.forward.0"

User mapping files (-am yaml, -cm yaml, -lm yaml, -dm yaml) are applied by core compare's NameMapper;
a user api_mapping rule wins over these defaults because NameMapper tries it first.
"""
import os
import re

from msprobe.core.paths import load_yaml

__all__ = ["ms_to_pt_entry_mapper", "default_api_mapping"]

_DEFAULTS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ms_to_pt_api.yaml")
# the API part may hold dots: "Mint.linalg.vector_norm.0.forward"
_API_ENTRY = re.compile(r"^(?P<api>[^.]+\..+?)\.(?P<tail>\d+\.(?:forward|backward))$")
# prefix renames that hold for every API of a namespace
_PREFIX_RULES = {"Mint": "Torch", "MintFunctional": "Functional"}
# primitives that mint.nn / nn cells call, keyed by "Primitive.{attribute}.{Class}"
_PRIMITIVE_RULES = {"Primitive.dense.Dense": "Functional.linear", "Primitive.matmul.MatMul": "Torch.matmul"}
_PRIMITIVE_ENTRY = re.compile(r"^(?P<key>Primitive\.[^.]+\.[^.]+)\.(?P<tail>\d+\.(?:forward|backward))$")
_DEFAULTS = None


def default_api_mapping():
    """{"Functional.abs": "Torch.abs", ...} from the packaged ms_to_pt_api.yaml."""
    global _DEFAULTS
    if _DEFAULTS is None:
        _DEFAULTS = {str(k): str(v) for k, v in (load_yaml(_DEFAULTS_FILE, what="MindSpore API mapping") or {}).items()}
    return _DEFAULTS


def map_api(api):
    """'Mint.add' -> 'Torch.add'; unknown names are returned unchanged."""
    mapped = default_api_mapping().get(api)
    if mapped:
        return mapped
    prefix, _, name = api.partition(".")
    if prefix in _PREFIX_RULES:
        return f"{_PREFIX_RULES[prefix]}.{name}"
    return api


def ms_to_pt_entry_mapper(api_defaults=True, cells_to_modules=False):
    """A callable entry -> entry for CompareOptions.entry_mapper, or None when nothing is enabled."""
    if not api_defaults and not cells_to_modules:
        return None
    cache = {}

    def mapper(entry):
        hit = cache.get(entry)
        if hit is not None:
            return hit
        result = entry
        if cells_to_modules and entry.startswith("Cell."):
            result = "Module." + entry[len("Cell."):]
        elif api_defaults:
            primitive = _PRIMITIVE_ENTRY.match(entry)
            match = _API_ENTRY.match(entry) if primitive is None else None
            if primitive is not None:
                if primitive.group("key") in _PRIMITIVE_RULES:
                    result = f"{_PRIMITIVE_RULES[primitive.group('key')]}.{primitive.group('tail')}"
            elif match is not None:
                result = f"{map_api(match.group('api'))}.{match.group('tail')}"
        cache[entry] = result
        return result
    return mapper
