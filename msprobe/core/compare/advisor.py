"""Advisor: find the first suspect row of a compare result and explain what to check next.

The suspect is the first row whose 'Accuracy Reached or Not' is 'No' (tensor mode) or, in statistics
mode, the first red row, else the first 'Warning' row. Written as `advisor_{timestamp}.txt`:

    Line: <0-based row index>
    Suspect Nodes: <NPU Name>
    Expert Advice: <numbered hints>
"""
import numpy as np

from msprobe.core.paths import atomic_write_text

__all__ = ["find_suspect", "advice_for", "write_advisor"]

_ADVICE = {
    "input": ("1. Look at where this input comes from: the API that produced it, or the data loader "
              "if it is the first call.\n"
              "2. An in-place API may have written its result over this input after it was dumped; check "
              "the calls that share the tensor.\n"
              "3. If neither explains it, memory may have been overwritten; dump the producer again with tensor "
              "task to confirm."),
    "output": ("1. The inputs agree but the output does not: this API (or module) itself computes "
               "differently on the two sides.\n"
               "2. Compare its implementation or kernel, its dtype (mixed precision, fused ops) and any "
               "non-deterministic setting.\n"
               "3. Reproduce it alone with `msprobe -f pytorch run_ut` on the dumped inputs."),
    "parameters": ("1. The weights differ before the call: check checkpoint loading, initialisation seeds and "
                   "the optimizer step of the previous iteration.\n"
                   "2. Compare the parameters_grad rows of the previous step."),
    "parameters_grad": ("1. A parameter gradient differs: look at the backward rows of the module that owns "
                        "it and the loss scaling.\n"
                        "2. Check gradient clipping and communication (all_reduce) of gradients."),
    "backward": ("1. The error appears in the backward pass: check the loss and the gradient of the last "
                 "forward output first.\n"
                 "2. Then follow the backward rows in order to the first one whose inputs agree and outputs do not."),
}


def _role_of(name):
    if ".parameters_grad." in name:
        return "parameters_grad"
    for role in ("input", "output", "parameters"):
        if f".{role}." in name:
            return role
    return "output"


def find_suspect(result):
    """(row index, NPU name) of the first suspect row, or None when every row passes."""
    names = result.columns.get("NPU Name", [])
    verdicts = result.columns.get("Accuracy Reached or Not")
    if verdicts is not None:
        for index, verdict in enumerate(verdicts):
            if verdict == "No":
                return index, names[index]
        return None
    red = np.flatnonzero(np.asarray(result.color) == 2)
    if len(red):
        return int(red[0]), names[int(red[0])]
    for index, value in enumerate(result.columns.get("Result", [])):
        if value == "Warning":
            return index, names[index]
    return None


def advice_for(name):
    role = _role_of(name)
    if role == "output" and ".backward." in name:
        return _ADVICE["backward"]
    return _ADVICE[role]


def advisor_text(result):
    suspect = find_suspect(result)
    if suspect is None:
        return "Line: N/A\nSuspect Nodes: N/A\nExpert Advice: All rows reached accuracy; no suspect found.\n"
    index, name = suspect
    return f"Line: {index}\nSuspect Nodes: {name}\nExpert Advice: {advice_for(name)}\n"


def write_advisor(result, path):
    """Write the advisor text (advisor_{timestamp}.txt) to `path`; returns (path, text)."""
    text = advisor_text(result)
    atomic_write_text(path, text)
    return path, text
