"""The one schema of dump names: build, parse and validate entry, row and tensor-file names.

API entries:     `{Prefix}.{api}.{call_index}.{forward|backward}`   (Prefix: Torch, Functional, Tensor,
                 Distributed, NPU, Aten, VF, Mint, MintFunctional, Primitive, Jit, ...)
Module entries:  `{Module|Cell}.{path}.{ClassName}.{forward|backward}.{call_index}`
Parameter grads: `{Module|Cell}.{path}.{ClassName}.parameters_grad`
Rows / files:    `{entry}.{input|output|parameters|...}.{index or key}[.{sub}]` (+ `.pt` / `.npy`)
Call names:      `{Prefix}.{api}.{call_index}` (run_ut reports, op_generate's api_name)

This module also owns the three rules that used to be copied around: which APIs write in place,
which recorded values are tensor descriptors, and which APIs have random output.

    >>> name = EntryName.parse("Functional.linear.0.forward")
    >>> (name.api, name.index, str(name.with_direction("backward")))
    ('linear', '0', 'Functional.linear.0.backward')
"""
import functools
import re
from dataclasses import astuple, dataclass, replace
from typing import Optional, Tuple

from msprobe.core.errors import ConfigError

__all__ = ["FORWARD", "BACKWARD", "PARAMS_GRAD", "MODULE_PREFIXES", "DIRECTIONS", "EntryName", "ParsedName",
           "backward_of", "call_of", "parse_name", "parse_row_name", "parse_call_name", "api_name", "entry_of_call",
           "module_name",
           "params_grad_name",
           "strip_call_index", "is_module_name", "dotted_attribute", "tensor_file_name", "parse_tensor_file_name",
           "check_api_name", "is_api_name", "is_inplace", "INPLACE_DUNDERS", "RANDOM_APIS", "is_random_api",
           "TENSOR_TYPE_SUFFIXES", "is_tensor_descriptor", "tensor_descriptors", "MAX_API_NAME_LEN"]

FORWARD, BACKWARD = "forward", "backward"
DIRECTIONS = (FORWARD, BACKWARD)
MODULE_PREFIXES = ("Module", "Cell")
PARAMS_GRAD = "parameters_grad"
TENSOR_FILE_SUFFIXES = (".pt", ".npy", ".bin")

_DIRS = r"forward|backward"
_API = re.compile(rf"(?P<prefix>[^.]+)\.(?P<api>.+)\.(?P<index>\d+)\.(?P<dir>{_DIRS})")
_MODULE = re.compile(rf"(?P<prefix>Module|Cell)\.(?P<api>.+)\.(?P<dir>{_DIRS})\.(?P<index>\d+)")
_PGRAD = re.compile(r"(?P<prefix>Module|Cell)\.(?P<api>.+)\.parameters_grad")
# row names carry a tail after the entry: the shortest entry prefix wins ('...0.forward.output.0')
_API_ROW = re.compile(rf"(?P<prefix>[^.]+)\.(?P<api>.+?)\.(?P<index>\d+)\.(?P<dir>{_DIRS})(?:\.(?P<tail>.+))?")
_MODULE_ROW = re.compile(rf"(?P<prefix>Module|Cell)\.(?P<api>.+?)\.(?P<dir>{_DIRS})\.(?P<index>\d+)(?:\.(?P<tail>.+))?")
_PGRAD_ROW = re.compile(r"(?P<prefix>Module|Cell)\.(?P<api>.+?)\.parameters_grad(?:\.(?P<tail>.+))?")

# the grammar of API names that become code or file names (op_generate, run_ut file names):
# ASCII identifiers (dunders included) joined by dots, a call index, optionally a direction
MAX_API_NAME_LEN = 200
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_SAFE_CALL = re.compile(rf"(?P<prefix>[A-Za-z][A-Za-z0-9_]*)\.(?P<api>{_IDENT}(?:\.{_IDENT})*)\.(?P<index>[0-9]+)"
                        rf"(?:\.(?P<dir>{_DIRS}))?")  # [0-9], not \d: '٣' is a digit to \d


@dataclass(frozen=True)
class EntryName:
    """One dump.json entry name. For APIs `api` is the API path ('linear', 'addmm.default');
    for modules the module path plus class ('l1.Linear'); `index` is '' for parameters_grad."""
    prefix: str
    api: str
    index: str
    direction: str  # forward | backward | parameters_grad
    is_module: bool

    def __str__(self):
        if self.direction == PARAMS_GRAD:
            return f"{self.prefix}.{self.api}.{PARAMS_GRAD}"
        if self.is_module:
            return f"{self.prefix}.{self.api}.{self.direction}.{self.index}"
        return f"{self.prefix}.{self.api}.{self.index}.{self.direction}"

    @classmethod
    def parse(cls, name) -> Optional["EntryName"]:
        """The parts of an entry name, or None for names of another shape."""
        if not isinstance(name, str):
            return None
        parsed = _parse_entry(name)
        return parsed if cls is EntryName or parsed is None else cls(*astuple(parsed))

    @property
    def op_name(self):
        """Name without call index, used by fuzzy matching ('Functional.linear.forward')."""
        return f"{self.prefix}.{self.api}.{self.direction}"

    @property
    def call_name(self):
        """Name without direction: 'Functional.linear.0' (run_ut rows); modules 'Module.l1.Linear.0'."""
        return f"{self.prefix}.{self.api}.{self.index}" if self.index else f"{self.prefix}.{self.api}"

    @property
    def short_api(self):
        """The last part of the API path ('vector_norm' of 'linalg.vector_norm'); for modules the class."""
        return self.api.rsplit(".", 1)[-1]

    def with_direction(self, direction) -> "EntryName":
        return replace(self, direction=direction)


ParsedName = EntryName  # the wave-1 name, kept for existing callers


@functools.lru_cache(maxsize=65536)
def _parse_entry(name: str) -> Optional[EntryName]:
    """EntryName.parse, cached: a job compare parses the same few thousand names in every pair."""
    for pattern, module in ((_MODULE, True), (_PGRAD, True), (_API, False)):
        match = pattern.fullmatch(name)
        if match:
            groups = match.groupdict()
            return EntryName(groups["prefix"], groups["api"], groups.get("index") or "",
                             groups.get("dir") or PARAMS_GRAD, module)
    return None


@functools.lru_cache(maxsize=8192)
def backward_of(name):
    """The backward entry of a forward entry ('Functional.relu.0.forward' -> 'Functional.relu.0.backward',
    'Module.a.A.forward.0' -> 'Module.a.A.backward.0'); other names (None, 'optimizer') unchanged."""
    parsed = EntryName.parse(name)
    if parsed is None or parsed.direction != FORWARD:
        return name
    return str(parsed.with_direction(BACKWARD))


def call_of(name):
    """The entry name without its direction ('Functional.relu.3.forward' -> 'Functional.relu.3',
    'Module.a.A.forward.0' -> 'Module.a.A.0'); names without a direction unchanged."""
    parsed = EntryName.parse(name)
    if parsed is None or parsed.direction == PARAMS_GRAD:
        return name
    return parsed.call_name if not parsed.is_module else f"{parsed.prefix}.{parsed.api}.{parsed.index}"


def parse_name(name) -> Optional[EntryName]:
    """Parse an entry name; returns EntryName or None for names of another shape."""
    return EntryName.parse(name)


def parse_row_name(name) -> Tuple[Optional[EntryName], str]:
    """'Functional.linear.0.forward.output.1' -> (EntryName of 'Functional.linear.0.forward', 'output.1').
    (None, '') for names of another shape."""
    if not isinstance(name, str):
        return None, ""
    for pattern, module in ((_MODULE_ROW, True), (_PGRAD_ROW, True), (_API_ROW, False)):
        if module and name.split(".", 1)[0] not in MODULE_PREFIXES:
            continue
        match = pattern.fullmatch(name)
        if match:
            groups = match.groupdict()
            entry = EntryName(groups["prefix"], groups["api"], groups.get("index") or "",
                              groups.get("dir") or PARAMS_GRAD, module)
            return entry, groups.get("tail") or ""
    return None, ""


def parse_call_name(name) -> Optional[Tuple[str, str, str]]:
    """'Functional.linear.0' -> ('Functional', 'linear', '0'); None for other shapes (any direction
    suffix is ignored)."""
    entry, _ = parse_row_name(name) if isinstance(name, str) else (None, "")
    if entry is not None and not entry.is_module:
        return entry.prefix, entry.api, entry.index
    match = re.fullmatch(r"(?P<prefix>[^.]+)\.(?P<api>.+)\.(?P<index>\d+)", name) if isinstance(name, str) else None
    return (match["prefix"], match["api"], match["index"]) if match else None


def api_name(prefix, api, index, direction):
    return str(EntryName(prefix, api, str(index), direction, False))


def entry_of_call(call_name, direction):
    """'Functional.linear.0' + 'forward' -> 'Functional.linear.0.forward'; a name of another shape gets
    '.{direction}' appended."""
    parsed = parse_call_name(call_name)
    return api_name(*parsed, direction) if parsed else f"{call_name}.{direction}"


def module_name(prefix, path, class_name, direction, index):
    return str(EntryName(prefix, f"{path}.{class_name}", str(index), direction, True))


def params_grad_name(prefix, path, class_name):
    return str(EntryName(prefix, f"{path}.{class_name}", "", PARAMS_GRAD, True))


def is_module_name(name):
    return name.split(".", 1)[0] in MODULE_PREFIXES


def strip_call_index(name):
    """'Functional.linear.3.forward' -> 'Functional.linear.forward' (modules keep their name shape)."""
    parsed = parse_name(name)
    return parsed.op_name if parsed else name


def tensor_file_name(entry, role, *keys, suffix=".pt"):
    """'Functional.linear.0.forward' + 'input', 0 -> 'Functional.linear.0.forward.input.0.pt'."""
    return ".".join([str(entry), role, *map(str, keys)]) + suffix


def parse_tensor_file_name(file_name) -> Tuple[Optional[EntryName], str, str]:
    """'Functional.linear.0.forward.input.0.pt' -> (EntryName, 'input.0', '.pt'); (None, '', '') otherwise."""
    for suffix in TENSOR_FILE_SUFFIXES:
        if isinstance(file_name, str) and file_name.endswith(suffix):
            entry, tail = parse_row_name(file_name[: -len(suffix)])
            if entry is not None and tail:
                return entry, tail, suffix
    return None, "", ""


def is_api_name(name) -> bool:
    """Whether `name` follows the API-name grammar ('Functional.linear.0', 'Tensor.__mul__.3.forward')."""
    return isinstance(name, str) and len(name) <= MAX_API_NAME_LEN and _SAFE_CALL.fullmatch(name) is not None


def check_api_name(name, what="API name", direction=None) -> EntryName:
    """Validate a name that becomes code or a file name; returns it parsed (direction `direction`,
    or the one in the name, or 'forward'). Anything else raises ConfigError with one line."""
    if not is_api_name(name):
        shown = repr(name)[:80]
        raise ConfigError(f"{what} {shown} is not an API name like 'Functional.softmax.0' or "
                          "'Tensor.__mul__.2.forward' (letters, digits, '_' and dots only).")
    match = _SAFE_CALL.fullmatch(name)
    assert match is not None  # is_api_name accepted it
    return EntryName(match["prefix"], match["api"], match["index"], direction or match["dir"] or FORWARD, False)


def dotted_attribute(root, path):
    """root.a.b for an API path 'a.b' ('linalg.vector_norm'), or None when a part is missing. Only for
    paths of msprobe's own API lists: a name read from a dump or a message resolves through
    msprobe.core.api_resolver, never by walking attributes."""
    obj = root
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


# -- in-place APIs ---------------------------------------------------------------------------------
INPLACE_DUNDERS = frozenset((
    "__iadd__", "__isub__", "__imul__", "__idiv__", "__itruediv__", "__ifloordiv__", "__imod__", "__ipow__",
    "__iand__", "__ior__", "__ixor__", "__ilshift__", "__irshift__", "__imatmul__", "__setitem__"))


def is_inplace(api, kwargs=None) -> bool:
    """Whether an API writes into its first argument: 'add_', '__iadd__', '__setitem__', an ATen
    overload 'add_.Tensor', or a call with inplace=True ('relu(x, inplace=True)')."""
    parts = str(api).split(".")
    for part in {parts[0], parts[-1]}:
        if part in INPLACE_DUNDERS or (part.endswith("_") and not part.endswith("__")):
            return True
    return bool(kwargs) and kwargs.get("inplace") is True


# -- random APIs -----------------------------------------------------------------------------------
# their outputs are random or uninitialised, so two runs cannot be compared (both frameworks)
RANDOM_APIS = frozenset((
    "dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout", "rrelu",
    "rrelu_", "native_dropout", "rand", "rand_like", "randn", "randn_like", "randint", "randint_like",
    "randperm", "normal", "normal_", "bernoulli", "bernoulli_", "multinomial", "uniform_", "exponential_",
    "geometric_", "log_normal_", "cauchy_", "random_", "empty", "empty_like", "new_empty",
    "new_empty_strided", "empty_strided", "gumbel_softmax", "fractional_max_pool2d", "fractional_max_pool3d",
))


def is_random_api(api) -> bool:
    """Whether an API path ('dropout', 'native_dropout.default', 'nn.functional.dropout') is random."""
    parts = str(api).split(".")
    return parts[0] in RANDOM_APIS or parts[-1] in RANDOM_APIS


# -- tensor descriptors ----------------------------------------------------------------------------
TENSOR_TYPE_SUFFIXES = ("Tensor", "Parameter", "StubTensor", "ndarray")


def is_tensor_descriptor(node) -> bool:
    """Whether a dump.json value describes a tensor: a dict whose "type" names a tensor class
    ('torch.Tensor', 'mindspore.Parameter', 'numpy.ndarray') or that has both "dtype" and "shape"."""
    if not isinstance(node, dict):
        return False
    kind = node.get("type")
    if isinstance(kind, str) and kind.endswith(TENSOR_TYPE_SUFFIXES):
        return True
    return "dtype" in node and "shape" in node


def tensor_descriptors(node):
    """The tensor descriptors under a dump.json value (lists, tuples and dicts walked), in order."""
    if is_tensor_descriptor(node):
        yield node
    elif isinstance(node, (list, tuple)):
        for item in node:
            yield from tensor_descriptors(item)
    elif isinstance(node, dict):
        for item in node.values():
            yield from tensor_descriptors(item)
