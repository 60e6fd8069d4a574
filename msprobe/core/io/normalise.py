"""One call record for every dump layout: msprobe's own, msprobe 1.2.1's and mindstudio-probe 26.x's.

The tools record the same call in different layouts. `normalise_dump` maps a dump.json's `data` onto the
layout msprobe writes, once, when the file is loaded, so that matching, the verdict, the graph and every
report see one record whichever tool wrote each side. The normalised record of one call:

    entry name     `{Prefix}.{api}.{n}.{forward|backward}`; a module's parameter gradients are the entry
                   `{Module}.{path}.{Class}.parameters_grad` (26.x writes `...parameters_grad.0`)
    forward        PyTorch functionals (arg_schemas.py): `input_args` the parameters torch passes by
                   position; `input_kwargs` every other one by name, in torch's order, defaults filled in
                   where the dump left one out (26.x and 1.2.1 write a layer_norm's weight, bias and eps
                   as positions 2-4, msprobe by keyword, with all defaults); other calls as dumped;
                   `output` as dumped
    backward       `input`: one slot per forward output, its gradient or null; `output`: one slot per
                   forward argument (each positional one, then each tensor keyword one), the gradient of
                   that argument or null (26.x leaves None gradients out and orders them as the kernel
                   returns them: linear's [bias, input, weight transposed] becomes [input, weight, bias];
                   on MindSpore last argument first: LayerNorm's [beta, gamma, x] becomes [x, gamma, beta])
    descriptors    unchanged: type, dtype, shape, Max/Min/Mean/Norm, md5, data_name, value

and two facts about the table: `tool` (TOOL_MSPROBE, or TOOL_REFERENCE for the 1.2.1 / 26.x layout) and
`not_comparable` ({row-name prefix: why}), the rows whose meaning differs between the tools, so that a
pair of a msprobe dump and a reference dump reports them (compare/cross_tool.py) "not comparable across tools", never as a
suspect: 26.x's cross_entropy backward output is the gradient with respect to the log-probabilities
(msprobe's: the logits), and a backward output whose shape matches no argument of its forward call
(26.x's linear of a 3-d input gives the gradient of an inner view) has no argument to be compared with.

A msprobe dump is already in this layout and passes unchanged (the check costs one look at each entry
name). What cannot be normalised: calls one tool dumps and the other does not (26.x's risk_level FOCUS
leaves chunk/transpose/reshape out of L1; msprobe records the optimizer's calls) stay rows without a
counterpart.
"""
import re

from msprobe.core.dump_paths import rank_label
from msprobe.core.io.arg_schemas import FUNCTIONAL_SCHEMAS

__all__ = ["normalise_dump", "dump_tool", "TOOL_MSPROBE", "TOOL_REFERENCE", "CROSS_TOOL_SEMANTICS", "LEFT_OUT"]

TOOL_MSPROBE, TOOL_REFERENCE = "msprobe", "reference"
_INDEXED_GRAD = re.compile(r"\.parameters_grad\.\d+$")
# a null gradient slot of a reference dump: that tool leaves None gradients out, and a gradient it did not record
# (a linear's weight when it records an inner view's) looks the same; said only where the other side holds one
LEFT_OUT = "the reference tool recorded no gradient for this argument"
# PyTorch backward outputs whose meaning differs between msprobe and the reference tools (API -> why)
CROSS_TOOL_SEMANTICS = {
    "cross_entropy": "the reference tool (26.2.0 measured) records the gradient with respect to the "
                     "log-probabilities, msprobe the gradient with respect to the logits",
}


def _api(entry):
    """'Functional.layer_norm.0.forward' -> ('Functional', 'layer_norm'); MindSpore's
    'Primitive.matmul.MatMul.0.forward' -> ('Primitive', 'matmul.MatMul'); None for module and other names."""
    parts = entry.split(".")
    if len(parts) >= 4 and parts[0] not in ("Module", "Cell") and parts[-2].isdigit():
        return parts[0], ".".join(parts[1:-2])
    return None


def _in_proc_folder(path):
    """Whether a folder of `path` is 26.x's `proc<PID>` rank folder (dump_paths' one rule for folder names)."""
    return any((rank_label(part) or "").startswith("proc") for part in re.split(r"[\\/]", path))


def dump_tool(data, path="", framework="pytorch"):
    """TOOL_REFERENCE when the dump at `path` with entries `data` is laid out as 1.2.1 / 26.x write it: a
    `proc<PID>` folder (26.x), an indexed `parameters_grad.N` entry, or (PyTorch) a Python functional call
    holding a keyword argument by position; TOOL_MSPROBE otherwise."""
    if path and _in_proc_folder(str(path)):
        return TOOL_REFERENCE
    torch_schemas = framework in (None, "pytorch")
    for entry, body in data.items():
        if not entry.endswith(".forward"):
            if "parameters_grad." in entry and _INDEXED_GRAD.search(entry):
                return TOOL_REFERENCE
            continue
        if torch_schemas and entry.startswith("Functional."):
            api = _api(entry)
            schema = FUNCTIONAL_SCHEMAS.get(api[1]) if api else None
            if schema is not None and isinstance(body, dict):
                args = body.get("input_args")
                if isinstance(args, list) and len(args) > schema[1]:
                    return TOOL_REFERENCE
    return TOOL_MSPROBE


def normalise_dump(data, path="", framework="pytorch"):
    """(data in the normalised layout, tool, not_comparable). `data` is a dump.json's `data` object, written
    for `framework` (the dump's header: torch's functional schemas apply to PyTorch dumps only); a msprobe
    dump comes back as it is (the same dict)."""
    tool = dump_tool(data, path, framework)
    if tool == TOOL_MSPROBE:
        return data, tool, {}
    torch_schemas = framework in (None, "pytorch")
    out, not_comparable = {}, {}
    for entry, body in data.items():
        if not isinstance(body, dict):
            out[entry] = body
            continue
        if _INDEXED_GRAD.search(entry):
            out[entry.rsplit(".", 1)[0]] = body
            continue
        api = _api(entry)
        if api and torch_schemas and entry.endswith(".forward"):
            body = _forward_by_schema(api, body)
        out[entry] = body
    for entry, body in list(out.items()):
        api = _api(entry)
        if api and entry.endswith(".backward") and isinstance(body, dict):
            forward = out.get(entry[:-len("backward")] + "forward")
            out[entry] = _backward_by_position(entry, body, forward, not_comparable, reverse=not torch_schemas)
            if torch_schemas and api[1] in CROSS_TOOL_SEMANTICS:
                not_comparable[f"{entry}.output"] = CROSS_TOOL_SEMANTICS[api[1]]
    return out, tool, not_comparable


def _forward_by_schema(api, body):
    """A Python functional's arguments as torch hands them to function hooks: the schema's leading
    parameters by position, the rest by name, defaults filled in."""
    schema = FUNCTIONAL_SCHEMAS.get(api[1]) if api[0] == "Functional" else None
    args = body.get("input_args")
    if schema is None or not isinstance(args, list):
        return body
    names, leading, keywords = schema
    kwargs = dict(body.get("input_kwargs") or {})
    if len(args) > leading:
        for name, value in zip(names[leading:], args[leading:]):
            kwargs.setdefault(name, value)
        args = args[:leading]
    ordered = {}
    for name, default in keywords:
        if name in kwargs:
            ordered[name] = kwargs.pop(name)
        else:
            ordered[name] = None if default is None else {"type": type(default).__name__, "value": default}
    ordered.update(kwargs)  # names the schema does not know stay, after the known ones
    body = dict(body)
    body["input_args"], body["input_kwargs"] = args, ordered
    return body


def _is_tensor(node):
    return isinstance(node, dict) and "shape" in node and "dtype" in node


def _slots(forward):
    """The forward arguments a backward output can be the gradient of, in msprobe's order."""
    args = forward.get("input_args") or []
    kwargs = forward.get("input_kwargs") or {}
    return list(args) + [value for value in kwargs.values() if _is_tensor(value)]


def _backward_by_position(entry, body, forward, not_comparable, reverse):
    """The backward outputs put in the slot of the forward argument each is the gradient of, and the
    backward inputs in the slot of the forward output each is the gradient of (by shape, in order; a 2-d
    gradient may be the transpose of its argument), null in slots without one. `reverse`: the outputs
    are listed last argument first (26.x on MindSpore: BiasAdd [bias, input], LayerNorm [beta, gamma, x])."""
    if not isinstance(forward, dict):
        return body
    body = dict(body)
    outputs = body.get("output")
    if isinstance(outputs, list):
        slots = _slots(forward)
        body["output"] = _place(f"{entry}.output", outputs[::-1] if reverse else outputs, slots,
                                len(forward.get("input_args") or []), not_comparable)
    inputs, forward_outputs = body.get("input"), forward.get("output")
    if isinstance(inputs, list) and isinstance(forward_outputs, list) and len(inputs) < len(forward_outputs):
        body["input"] = _place(f"{entry}.input", inputs, forward_outputs, len(forward_outputs), not_comparable)
    return body


def _place(prefix, nodes, slots, keep, not_comparable):
    """`nodes` (gradients) in the slots of the tensors they are the gradients of: a list as long as `slots`
    (at least `keep` long, trailing empty slots past it dropped), null where no gradient was recorded."""
    placed = [None] * len(slots)
    unplaced = []
    for node in nodes:
        if not _is_tensor(node):
            continue
        shape = list(node.get("shape") or [])
        slot = _free_slot(slots, placed, shape)
        if slot is None and len(shape) == 2:
            slot = _free_slot(slots, placed, shape[::-1])
            if slot is not None:  # statistics of a transpose are the argument's; its shape is the argument's
                node = dict(node, shape=slots[slot]["shape"])
                node.pop("data_name", None)  # the file holds the transpose: compared by statistics only
        if slot is None:
            unplaced.append(node)
        else:
            placed[slot] = node
    for node in unplaced:  # kept in free slots (or after them), their rows said not comparable
        free = placed.index(None) if None in placed else len(placed)
        if free == len(placed):
            placed.append(node)
        else:
            placed[free] = node
        not_comparable.setdefault(f"{prefix}.{free}", f"the reference tool recorded a gradient of shape "
                                                      f"{node.get('shape')}, which is no tensor's shape of the forward call")
    while placed and placed[-1] is None and len(placed) > keep:
        placed.pop()
    for slot, node in enumerate(placed):
        if node is None and slot < len(slots) and _is_tensor(slots[slot]):
            not_comparable.setdefault(f"{prefix}.{slot}", LEFT_OUT)
    return placed


def _free_slot(slots, placed, shape):
    for index, node in enumerate(slots):
        if placed[index] is None and _is_tensor(node) and list(node.get("shape") or []) == shape:
            return index
    return None
