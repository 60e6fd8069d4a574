"""L2 kernel dump for static graphs (GRAPH_MODE, jit) through MindSpore's native dump.

`GraphDump.start()` writes a native dump configuration and points MINDSPORE_DUMP_CONFIG at it;
MindSpore reads it when it compiles a graph, so start() must come before the network first runs.
Native files land in `{dump_path}/rank_{id}/{net}/{graph_id}/{iteration}/` as
`{OpType}.{OpName}.{task}.{stream}.{timestamp}.{input|output}.{slot}.{format}.{dtype}.npy`.

On CPU MindSpore writes only tensor data, so for task "statistics" `finalize()` (run by step(),
close() and at exit) computes the statistics of every file into `statistic.csv` next to it and
removes the .npy files. The config maps as: list -> kernels (a name, or `name-regex(...)`),
data_mode input/output -> input_output, step -> iteration, summary_mode "md5" -> an MD5 column.
"""
import atexit
import csv
import glob
import os
import zlib

import numpy as np

from msprobe.core.errors import ConfigError, UnsupportedError
from msprobe.core.log import logger
from msprobe.core.paths import FILE_MODE, atomic_write_json

__all__ = ["GraphDump", "parse_kernel_file_name", "STAT_HEADER", "iteration_dirs", "NATIVE_CONFIG_NAME"]

NATIVE_CONFIG_NAME = "msprobe_native_dump_config.json"
STAT_FILE = "statistic.csv"
STAT_HEADER = ["Op Type", "Op Name", "Task ID", "Stream ID", "Timestamp", "IO", "Slot", "Data Size",
               "Data Type", "Shape", "Max Value", "Min Value", "Avg Value", "Count", "L2Norm Value"]
_IO_MODES = {"all": 0, "input": 1, "output": 2}


def parse_kernel_file_name(file_name):
    """dict(op_type, op_name, task_id, stream_id, timestamp, io, slot, format, dtype) or None."""
    parts = file_name.split(".")
    if len(parts) < 10 or parts[-1] != "npy" or parts[-5] not in ("input", "output"):
        return None
    return {"op_type": parts[0], "op_name": ".".join(parts[1:-8]), "task_id": parts[-8],
            "stream_id": parts[-7], "timestamp": parts[-6], "io": parts[-5], "slot": parts[-4],
            "format": parts[-3], "dtype": parts[-2]}


def iteration_dirs(root):
    """Every `{root}/rank_*/{net}/{graph}/{iteration}` directory of a native dump, sorted."""
    return sorted(d for d in glob.glob(os.path.join(root, "rank_*", "*", "*", "*")) if os.path.isdir(d))


def _iteration_text(steps):
    """[0, 2, 3, 4] -> '0|2-4' (MindSpore's iteration syntax); empty -> 'all'."""
    if not steps:
        return "all"
    ranges, start = [], steps[0]
    for prev, cur in zip(steps, steps[1:] + [None]):
        if cur != prev + 1:
            ranges.append(str(start) if start == prev else f"{start}-{prev}")
            start = cur
    return "|".join(ranges)


def _io_mode(data_mode):
    modes = [m for m in data_mode if m in _IO_MODES]
    if len(modes) != len(data_mode) or len(modes) != 1:
        raise ConfigError(f"data_mode {data_mode} is not supported for L2 kernel dump; use exactly one of "
                          "['all'], ['input'] or ['output'].")
    return _IO_MODES[modes[0]]


class GraphDump:
    """Drives MindSpore's native kernel dump for one PrecisionDebugger."""

    def __init__(self, config):
        if config.task == "overflow_check":
            raise UnsupportedError("overflow_check with level L2 needs Ascend hardware overflow detection; "
                                   "on this device use level L1 (PyNative) or task statistics at L2.")
        self.config = config
        self.dump_path = os.path.abspath(config.dump_path)
        self.io_mode = _io_mode(config.data_mode)
        self.want_md5 = config.summary_mode == "md5"
        self.started = False
        self._done_dirs = set()
        atexit.register(self.finalize)

    def native_config(self):
        cfg = self.config
        return {
            "common_dump_settings": {
                "op_debug_mode": 0,
                "dump_mode": 1 if cfg.list else 0,
                "path": self.dump_path,
                "net_name": "Net",
                "iteration": _iteration_text(cfg.step),
                "saved_data": "tensor",
                "input_output": self.io_mode,
                "kernels": list(cfg.list),
                "support_device": list(range(8)),
                "file_format": "npy",
            },
            "e2e_dump_settings": {"enable": True, "trans_flag": True},
        }

    def start(self):
        """Enable the native dump for graphs compiled from now on (idempotent)."""
        if self.started:
            return
        from msprobe.mindspore.dump.adapter import current_rank
        rank = current_rank() or 0
        if self.config.rank and rank not in self.config.rank:
            logger.info(f"msprobe: rank {rank} is not in config rank {self.config.rank}; no kernel dump here.")
            self.started = True
            return
        path = os.path.join(self.dump_path, NATIVE_CONFIG_NAME)
        atomic_write_json(path, self.native_config())
        os.environ["MINDSPORE_DUMP_CONFIG"] = path
        self.started = True
        logger.info(f"msprobe: MindSpore kernel dump (L2) enabled, config {path}.")

    def step(self):
        self.finalize()

    def close(self):
        self.finalize()

    def finalize(self):
        """Turn finished iterations into statistic.csv when the task is statistics."""
        if self.config.task != "statistics":
            return
        for directory in iteration_dirs(self.dump_path):
            if directory in self._done_dirs:
                continue
            write_statistics(directory, self.want_md5)
            self._done_dirs.add(directory)


def file_statistics(path):
    """Statistic row values (everything after the name fields) of one native .npy file."""
    from msprobe.mindspore.dump.adapter import array_statistics
    array = np.load(path, allow_pickle=False)
    stats = array_statistics(array) or [None] * 4
    return array, stats


def write_statistics(directory, want_md5=False):
    """Write `statistic.csv` for the .npy files of one iteration directory, then remove them."""
    files = sorted(f for f in os.listdir(directory) if f.endswith(".npy"))
    if not files:
        return
    rows = []
    for name in files:
        meta = parse_kernel_file_name(name)
        if meta is None:
            continue
        path = os.path.join(directory, name)
        array, stats = file_statistics(path)
        row = [meta["op_type"], meta["op_name"], meta["task_id"], meta["stream_id"], meta["timestamp"],
               meta["io"], meta["slot"], array.nbytes, meta["dtype"], "(" + ",".join(map(str, array.shape)) + ")",
               *("" if v is None else v for v in stats[:3]), array.size, "" if stats[3] is None else stats[3]]
        if want_md5:
            row.append(f"{zlib.crc32(np.ascontiguousarray(array).tobytes()) & 0xffffffff:08x}")
        rows.append(row)
    target = os.path.join(directory, STAT_FILE)
    with open(target, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(STAT_HEADER + (["MD5"] if want_md5 else []))
        writer.writerows(rows)
    os.chmod(target, FILE_MODE)
    for name in files:
        os.remove(os.path.join(directory, name))
