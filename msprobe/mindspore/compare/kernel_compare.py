"""Compare two MindSpore L2 kernel dumps (native layout) rank by rank and step by step.

Each iteration directory `rank_{r}/{net}/{graph}/{step}` is turned into a dump.json-shaped table in
memory (entry = `{OpType}.{OpName}`, input/output slots as rows; statistics from statistic.csv or the
.npy files, data_name = the .npy file) and handed to core compare (`compare_loaded`), so the report has
the same columns, metrics, judgement and highlighting as every other compare:
`compare_result_{rank}_{step}_{timestamp}.xlsx`. No dump.json is written; only bfloat16 files (a dtype
numpy cannot read) are handed over as float32 copies in a temporary directory.
"""
import csv
import os
import re
import tempfile
import time
from collections import defaultdict
from dataclasses import replace

import numpy as np

from msprobe.core.errors import CompareError
from msprobe.core.log import logger
from msprobe.core.paths import check_path, make_dir
from msprobe.core.dump.kernel_files import STAT_FILE, file_statistics, kernel_files

__all__ = ["is_kernel_dump", "compare_kernel_dumps", "kernel_dump_json"]

_RANK = re.compile(r"^rank_(\d+)$")


def is_kernel_dump(path):
    """True for a native kernel dump root (it has rank_{N} directories)."""
    return os.path.isdir(path) and any(_RANK.match(d) for d in os.listdir(path))


def _iterations(root):
    """{(rank, step): [iteration dirs]} of a kernel dump root (graphs of one step are merged)."""
    found = defaultdict(list)
    for rank_dir in sorted(os.listdir(root)):
        match = _RANK.match(rank_dir)
        if not match:
            continue
        rank_path = os.path.join(root, rank_dir)
        for net in sorted(os.listdir(rank_path)):
            net_path = os.path.join(rank_path, net)
            if net == "execution_order" or not os.path.isdir(net_path):
                continue
            for graph in sorted(os.listdir(net_path)):
                graph_path = os.path.join(net_path, graph)
                if not os.path.isdir(graph_path):
                    continue
                for step in sorted(os.listdir(graph_path)):
                    if step.isdigit() and os.path.isdir(os.path.join(graph_path, step)):
                        found[(int(match.group(1)), int(step))].append(os.path.join(graph_path, step))
    return found


def _number(text):
    if text in ("True", "False"):  # statistics of Bool tensors
        return text == "True"
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def _descriptors_from_csv(path):
    """[(op_type, op_name, io, slot, timestamp, descriptor)] from a statistic.csv (columns that a
    summary_mode list left out give None)."""
    rows = []
    with open(path, newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            shape = [int(v) for v in row["Shape"].strip("()").split(",") if v.strip()]
            desc = {"type": "mindspore.Tensor", "dtype": row["Data Type"], "shape": shape,
                    "Max": _number(row.get("Max Value")), "Min": _number(row.get("Min Value")),
                    "Mean": _number(row.get("Avg Value")), "Norm": _number(row.get("L2Norm Value"))}
            if row.get("MD5"):
                desc["md5"] = row["MD5"]
            rows.append((row["Op Type"], row["Op Name"], row["IO"], int(row["Slot"]), int(row["Timestamp"]), desc))
    return rows


def _descriptors_from_npy(directory, scratch):
    """Rows of the .npy files of one directory; bfloat16 files are copied as float32 into `scratch`."""
    rows = []
    for path, meta in kernel_files(directory):
        values, stored, stats = file_statistics(path)
        if values is not stored:  # numpy cannot read MindSpore's bfloat16 .npy: compare a float32 copy
            os.makedirs(scratch, exist_ok=True)
            path = os.path.join(scratch, f"{len(os.listdir(scratch))}.npy")
            np.save(path, values)
        desc = {"type": "mindspore.Tensor", "dtype": meta["dtype"], "shape": list(values.shape)}
        desc.update(zip(("Max", "Min", "Mean", "Norm"), stats))
        desc["data_name"] = path
        rows.append((meta["op_type"], meta["op_name"], meta["io"], int(meta["slot"]), int(meta["timestamp"]), desc))
    return rows


def kernel_dump_json(directories, scratch):
    """A dump.json dict for the kernels of one rank/step (one or more graph iteration dirs).
    `scratch`: a directory (created when needed) for float32 copies of bfloat16 files."""
    rows = []
    for directory in directories:
        stat_file = os.path.join(directory, STAT_FILE)
        if os.path.isfile(stat_file):
            rows.extend(_descriptors_from_csv(stat_file))
        rows.extend(_descriptors_from_npy(directory, scratch))
    has_files = any("data_name" in r[5] for r in rows)
    order = {}
    slots = defaultdict(lambda: {"input": {}, "output": {}})
    for op_type, op_name, io, slot, stamp, desc in rows:
        entry = f"{op_type}.{op_name}"
        order[entry] = min(order.get(entry, stamp), stamp)
        slots[entry][io][slot] = desc
    data = {}
    for entry in sorted(order, key=order.get):  # execution order
        body = {}
        for io, key in (("input", "input_args"), ("output", "output")):
            found = slots[entry][io]
            if found:
                body[key] = [found.get(i) for i in range(max(found) + 1)]
        data[f"{entry}.forward"] = body
    return {"task": "tensor" if has_files else "statistics", "level": "L2", "framework": "mindspore",
            "dump_data_dir": None, "data": data}


def _selected(keys, wanted, what):
    if not wanted:
        return keys
    chosen = [k for k in keys if k in wanted]
    if not chosen:
        raise CompareError(f"no {what} of {sorted(wanted)} found in the kernel dumps.")
    return chosen


def compare_kernel_dumps(npu_root, bench_root, output_dir, options, rank_ids=(), step_ids=()):
    """One compare_result_{rank}_{step}_{timestamp}.xlsx per rank/step both dumps have."""
    from msprobe.core.io.load import table_from_dump
    from msprobe.core.compare.pair import compare_loaded

    npu_root = check_path(npu_root, kind="dir", what="npu_path")
    bench_root = check_path(bench_root, kind="dir", what="bench_path")
    output_dir = make_dir(output_dir, what="output_path")
    npu_iters, bench_iters = _iterations(npu_root), _iterations(bench_root)
    keys = sorted(set(npu_iters) & set(bench_iters))
    if not keys:
        raise CompareError(f"the kernel dumps '{npu_root}' and '{bench_root}' have no rank_N/<net>/<graph>/<step> "
                           "directory in common; are both MindSpore L2 dumps of the same network?")
    keys = [k for k in _selected(keys, set(rank_ids), "rank_id") if not step_ids or k[1] in set(step_ids)]
    if not keys:
        raise CompareError(f"no step of {sorted(step_ids)} found in the kernel dumps.")
    options = replace(options, timestamp=options.timestamp or time.strftime("%Y%m%d%H%M%S"), fuzzy_match=False)
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="msprobe_kernel_") as tmp:
        for rank, step in keys:
            tables = []
            for side, root, iters in (("npu", npu_root, npu_iters), ("bench", bench_root, bench_iters)):
                scratch = os.path.join(tmp, f"{side}_{rank}_{step}", "bf16")
                dump = kernel_dump_json(iters[(rank, step)], scratch)
                label = os.path.join(root, f"rank_{rank}", f"step {step}")
                tables.append(table_from_dump(dump, label, data_dir=root))
            logger.info(f"kernel compare: rank {rank}, step {step}")
            outcomes.append(compare_loaded(tables[0], tables[1], output_dir, options, name_tag=f"_{rank}_{step}"))
    return outcomes
