"""Check a replayed MindSpore call before it runs: no file, path or handle arguments, and no tensor over the cap.

The same rule as PyTorch's (msprobe/pytorch/api_accuracy_checker/replay_guard.py, docs/security.md):

- `signature_refusal(function)`: an allow-listed API with a parameter named like a file name, path,
  storage, stream, generator, seed or handle is refused (MindSpore has no operator schema that Python can
  read; the signature is what it publishes). MindSpore run_ut rebuilds only tensors, numbers, booleans,
  strings and dtypes, so nothing else can reach a call.
- `check_call_size(...)`: the call is sized before the MindSpore op runs, through its PyTorch bench (the
  same op by definition) on torch's meta device, found through the framework seam; every tensor it makes
  may hold at most max(2^28, elements of its largest tensor argument) elements. Without a PyTorch bench
  the numbers among the arguments bound the size: their product may not exceed that cap.
"""
import inspect
import math
import re

from msprobe.core.api_resolver import MAX_MADE_ELEMENTS, PATH_PARAMETER_WORDS
from msprobe.core.errors import UnsupportedError

__all__ = ["signature_refusal", "check_call_size", "MAX_MADE_ELEMENTS"]

_HANDLE_PARAMETERS = re.compile(PATH_PARAMETER_WORDS + r"|storage|stream|generator|seed|handle", re.IGNORECASE)


def signature_refusal(function) -> str:
    """Why an allow-listed MindSpore API may not be replayed ('' when its parameters are tensors and
    plain values). C methods without a signature (Tensor.__add__) take tensors and numbers only."""
    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return ""
    for name in parameters:
        if _HANDLE_PARAMETERS.search(name):
            return f"its parameter '{name}' is a file name, path, seed or handle, not a tensor"
    return ""


def _numbers(value):
    """Every int among the (nested) plain arguments."""
    if isinstance(value, bool):
        return []
    if isinstance(value, int):
        return [value]
    if isinstance(value, (list, tuple)):
        return [number for item in value for number in _numbers(item)]
    if isinstance(value, dict):
        return [number for item in value.values() for number in _numbers(item)]
    return []


def check_call_size(api_name, shapes, plain_args, torch_sizing=None):
    """Raise UnsupportedError (one line) when the call would make a tensor over the cap. `shapes`: the
    shapes of its tensor arguments; `torch_sizing()`: sizes the PyTorch bench on the meta device (raises
    UnsupportedError), or None when there is no bench; then `plain_args` (the non-tensor arguments) bound
    the size by the product of their integers."""
    largest = max((math.prod(shape) for shape in shapes), default=0)
    if torch_sizing is not None:
        torch_sizing()
        return
    product = math.prod(abs(number) for number in _numbers(plain_args) if number)
    if product > max(MAX_MADE_ELEMENTS, largest):
        raise UnsupportedError(f"{api_name}: the numbers among its arguments multiply to {product}, over the cap "
                               f"of {max(MAX_MADE_ELEMENTS, largest)} elements, and it has no PyTorch bench to size "
                               "it on the meta device; refused, nothing was run")
