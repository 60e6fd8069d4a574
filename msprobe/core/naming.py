"""Dump entry names: build and parse `Functional.linear.0.forward`, `Module.l1.Linear.forward.0`.

API entries:    `{Prefix}.{api}.{call_index}.{forward|backward}`   (Prefix: Torch, Functional, Tensor,
                Distributed, NPU, Aten, Mint, MintFunctional, Primitive, Jit, ...)
Module entries: `{Module|Cell}.{path}.{ClassName}.{forward|backward}.{call_index}`
Parameter grads: `{Module|Cell}.{path}.{ClassName}.parameters_grad`
Tensor files:   `{entry}.{input|output|parameters}.{index or key}[.{sub}].{pt|npy}`
"""
import re
from dataclasses import dataclass

__all__ = ["dotted_attribute", "FORWARD", "BACKWARD", "MODULE_PREFIXES", "api_name", "module_name", "params_grad_name",
           "ParsedName", "parse_name", "strip_call_index", "is_module_name"]

FORWARD, BACKWARD = "forward", "backward"
MODULE_PREFIXES = ("Module", "Cell")
PARAMS_GRAD = "parameters_grad"


def api_name(prefix, api, index, direction):
    return f"{prefix}.{api}.{index}.{direction}"


def module_name(prefix, path, class_name, direction, index):
    return f"{prefix}.{path}.{class_name}.{direction}.{index}"


def params_grad_name(prefix, path, class_name):
    return f"{prefix}.{path}.{class_name}.{PARAMS_GRAD}"


def is_module_name(name):
    return name.split(".", 1)[0] in MODULE_PREFIXES


@dataclass(frozen=True)
class ParsedName:
    """The parts of an entry name. For APIs `api` is the API (e.g. 'linear'); for modules the
    module path plus class ('l1.Linear')."""
    prefix: str
    api: str
    index: str
    direction: str  # forward | backward | parameters_grad
    is_module: bool

    @property
    def op_name(self):
        """Name without call index, used by fuzzy matching ('Functional.linear.forward')."""
        return f"{self.prefix}.{self.api}.{self.direction}"


_API = re.compile(r"^(?P<prefix>[^.]+)\.(?P<api>.+)\.(?P<index>\d+)\.(?P<dir>forward|backward)$")
_MODULE = re.compile(r"^(?P<prefix>Module|Cell)\.(?P<api>.+)\.(?P<dir>forward|backward)\.(?P<index>\d+)$")
_PGRAD = re.compile(r"^(?P<prefix>Module|Cell)\.(?P<api>.+)\.parameters_grad$")


def parse_name(name):
    """Parse an entry name; returns ParsedName or None for names of another shape."""
    for pattern, module in ((_MODULE, True), (_PGRAD, True), (_API, False)):
        match = pattern.match(name)
        if match:
            groups = match.groupdict()
            return ParsedName(groups["prefix"], groups["api"], groups.get("index") or "",
                              groups.get("dir") or PARAMS_GRAD, module)
    return None


def strip_call_index(name):
    """'Functional.linear.3.forward' -> 'Functional.linear.forward' (modules keep their name shape)."""
    parsed = parse_name(name)
    return parsed.op_name if parsed else name


def dotted_attribute(root, path):
    """root.a.b for an API path 'a.b' ('linalg.vector_norm'), or None when a part is missing."""
    obj = root
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj
