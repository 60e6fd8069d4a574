"""overflow_check for MindSpore at L2 on CPU: find the first kernels with inf/nan in a native kernel dump.

MindSpore's CPU backend has no overflow detection of its own (Ascend kernels raise an overflow flag,
selected by check_mode aicore/atomic/all, and need the INF/NAN mode). On CPU the L2 dump writes every
kernel's inputs and outputs as .npy files; this module reads them back in execution order (the first
timestamp of each kernel's files), finds the kernels with a non-finite input or output (msprobe 1.2.1's
rule), keeps the files of the first `overflow_nums` of them (-1: all) and deletes the rest:

    kept = KernelOverflowFilter(overflow_nums=1)
    kept.finalize_directory("dump/rank_0/Net/0/0")   # -> kernel_overflow.json beside the kept files

kernel_overflow.json: {"first_producer": kernel, "kernels": [{"kernel", "role", "files"}]}, producers
first; roles as in origin.py (producer: finite inputs, non-finite output). Cost: a full tensor dump of
every kernel while the graph runs; the finite files are removed afterwards.

Needs the hook-up in msprobe/mindspore/dump/graph_dump.py (task overflow_check at L2 on CPU: dump
tensors like task "tensor", then call `finalize_directory` for each iteration directory at step()).
"""
import math
import os
from collections import OrderedDict
from typing import Dict, List, Optional

import numpy as np

from msprobe.core.dump.kernel_files import kernel_files, read_kernel_array
from msprobe.core.log import logger
from msprobe.core.paths import atomic_write_json

__all__ = ["KernelOverflowFilter", "REPORT_FILE", "kernel_roles"]

REPORT_FILE = "kernel_overflow.json"


def _non_finite(values) -> bool:
    return values.dtype.kind == "f" and values.size > 0 and not bool(np.isfinite(values).all())


def kernel_roles(directory: str) -> "OrderedDict[str, dict]":
    """{kernel: {"role": ... or None, "files": [paths], "first": timestamp}} in execution order."""
    kernels: Dict[str, dict] = {}
    for path, meta in kernel_files(directory):
        name = f"{meta['op_type']}.{meta['op_name']}"
        kernel = kernels.setdefault(name, {"files": [], "first": math.inf, "in": False, "out": False})
        kernel["files"].append(path)
        kernel["first"] = min(kernel["first"], int(meta["timestamp"]) if meta["timestamp"].isdigit() else math.inf)
        values, _ = read_kernel_array(path)
        if _non_finite(values):
            kernel["in" if meta["io"] == "input" else "out"] = True
    ordered = OrderedDict(sorted(kernels.items(), key=lambda item: (item[1]["first"], item[0])))
    for kernel in ordered.values():
        fed, bad = kernel.pop("in"), kernel.pop("out")
        kernel["role"] = ("propagator" if fed else "producer") if bad else ("consumer" if fed else None)
    return ordered


class KernelOverflowFilter:
    """Keeps the files of the first `overflow_nums` overflowing kernels over every directory it sees."""

    def __init__(self, overflow_nums: int = 1) -> None:
        self.limit = overflow_nums
        self.count = 0
        self.first_producer: Optional[str] = None

    def finalize_directory(self, directory: str) -> List[str]:
        """Filter one iteration directory; returns the kernels kept there."""
        kernels = kernel_roles(directory)
        kept, report = [], []
        for name, kernel in kernels.items():
            keep = kernel["role"] is not None and (self.limit == -1 or self.count < self.limit)
            if keep:
                self.count += 1
                kept.append(name)
                report.append({"kernel": name, "role": kernel["role"],
                               "files": sorted(os.path.basename(p) for p in kernel["files"])})
                if kernel["role"] == "producer" and self.first_producer is None:
                    self.first_producer = name
                    logger.warning(f"msprobe overflow_check (L2): inf/nan first produced by kernel {name} "
                                   f"(finite inputs, non-finite output) in {directory}.")
                continue
            for path in kernel["files"]:
                os.remove(path)
        if report:
            report.sort(key=lambda item: item["role"] != "producer")
            atomic_write_json(os.path.join(directory, REPORT_FILE),
                              {"first_producer": self.first_producer, "kernels": report})
        return kept
