"""L2 kernel dump for static graphs (GRAPH_MODE, jit) through MindSpore's native dump.

`GraphDump.start()` writes a native dump configuration and points MINDSPORE_DUMP_CONFIG at it;
MindSpore reads it when it compiles a graph, so start() must come before the network first runs.
Native files land in `{dump_path}/rank_{id}/{net}/{graph_id}/{iteration}/` as
`{OpType}.{OpName}.{task}.{stream}.{timestamp}.{input|output}.{slot}.{format}.{dtype}.npy`.

On CPU MindSpore writes only tensor data, so for task "statistics" `finalize()` (run by step(),
close() and at exit) computes the statistics of every file into `statistic.csv` next to it and
removes the .npy files (kernel_files.py reads them, long names and bfloat16 included). The config
maps as: list -> kernels (a name, or `name-regex(...)`), data_mode input/output -> input_output,
step -> iteration, rank -> no dump on other ranks, summary_mode "md5" -> an MD5 column, summary_mode
[max, min, mean, l2norm] -> only those statistic columns, file_format -> MindSpore's file_format
(task tensor; statistics are computed from .npy files). On the CPU backend MindSpore 2.10 writes .npy
whatever file_format says ("bin" is Ascend's format), so "bin" gets a one-line warning there.
overflow_check: on Ascend, check_mode selects MindSpore's own kernel overflow detection (op_debug_mode
aicore 1 / atomic 2 / all 3). The CPU backend has none, so there every kernel's tensors are dumped and
`finalize()` keeps only the first `overflow_nums` kernels with inf/nan (core/overflow/kernel_overflow.py,
with kernel_overflow.json naming the first producer); check_mode has no effect on CPU (one warning).
"""
import atexit
import glob
import os

from msprobe.core.dump.kernel_files import STAT_HEADER, parse_kernel_file_name, write_statistics
from msprobe.core.errors import ConfigError, UnsupportedError
from msprobe.core.framework import current_rank
from msprobe.core.log import logger
from msprobe.core.paths import atomic_write_json
from msprobe.mindspore.framework import FRAMEWORK

__all__ = ["GraphDump", "parse_kernel_file_name", "STAT_HEADER", "iteration_dirs", "NATIVE_CONFIG_NAME"]

NATIVE_CONFIG_NAME = "msprobe_native_dump_config.json"
_IO_MODES = {"all": 0, "input": 1, "output": 2}
_OP_DEBUG_MODES = {"aicore": 1, "atomic": 2, "all": 3}  # MindSpore's native overflow detection (Ascend)


def iteration_dirs(root):
    """Every `{root}/rank_*/{net}/{graph}/{iteration}` directory of a native dump, sorted."""
    return sorted(d for d in glob.glob(os.path.join(root, "rank_*", "*", "*", "*")) if os.path.isdir(d))


def _device_target():
    import mindspore as ms
    return ms.get_context("device_target")


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
        target = _device_target()
        self.overflow = None
        if config.task == "overflow_check":
            if target == "CPU":
                from msprobe.core.overflow.kernel_overflow import KernelOverflowFilter
                self.overflow = KernelOverflowFilter(config.overflow_nums)
                self.overflow_done = set()
                if config.check_mode != "all":
                    logger.warning(f"msprobe: check_mode '{config.check_mode}' has no effect on MindSpore's CPU "
                                   "backend (it selects Ascend's kernel overflow detection); every kernel's "
                                   "tensors are checked for inf/nan after each step instead.")
            elif target != "Ascend":
                raise UnsupportedError(f"overflow_check with level L2 needs Ascend's kernel overflow detection or "
                                       f"the CPU backend's tensor check; MindSpore's {target} backend has neither. "
                                       "Use level L1 (PyNative).")
        if config.task == "tensor" and config.file_format == "bin" and target == "CPU":
            logger.warning("msprobe: file_format 'bin' has no effect on MindSpore's CPU backend (it writes .npy "
                           "kernel files whatever the setting; 'bin' is Ascend's format); files stay .npy.")
        self.config = config
        self.dump_path = os.path.abspath(config.dump_path)
        self.io_mode = _io_mode(config.data_mode)
        self.want_md5 = config.summary_mode == "md5"
        # a list of statistic items keeps only those columns; "statistics" / "md5" keep them all
        self.stat_items = list(config.summary_mode) if isinstance(config.summary_mode, list) else None
        self.started = False
        atexit.register(self.finalize)

    def native_config(self):
        cfg = self.config
        return {
            "common_dump_settings": {
                "dump_mode": 1 if cfg.list else 0,
                "path": self.dump_path,
                "net_name": "Net",
                "iteration": _iteration_text(cfg.step),
                "saved_data": "tensor",
                "op_debug_mode": _OP_DEBUG_MODES[cfg.check_mode] if self.overflow is None and
                cfg.task == "overflow_check" else 0,
                "input_output": self.io_mode,
                "kernels": list(cfg.list),
                "support_device": list(range(8)),
                # statistics are computed here from .npy files, whatever the device could write
                "file_format": cfg.file_format if cfg.task == "tensor" else "npy",
            },
            "e2e_dump_settings": {"enable": True, "trans_flag": True},
        }

    def start(self):
        """Enable the native dump for graphs compiled from now on (idempotent)."""
        if self.started:
            return
        rank = current_rank(FRAMEWORK, default=0)
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
        """Finish the files and drop the exit callback (which would keep this object alive)."""
        atexit.unregister(self.finalize)
        self.finalize()

    def finalize(self):
        """Turn the tensor files written so far into statistic.csv rows when the task is statistics.

        Every iteration directory is looked at each time: MindSpore may add files to one later."""
        if self.overflow is not None:
            for directory in iteration_dirs(self.dump_path):
                if directory not in self.overflow_done:  # an iteration is complete once step() comes
                    self.overflow_done.add(directory)
                    self.overflow.finalize_directory(directory)
            return
        if self.config.task != "statistics":
            return
        for directory in iteration_dirs(self.dump_path):
            write_statistics(directory, self.want_md5, self.stat_items)
