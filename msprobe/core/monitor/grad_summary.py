"""grad_probe output: per-level CSV headers, summary rows and direction files of one rank, written off the training thread.

Layout (msprobe 1.2.1's)::

    {dump_path}/rank{r}/grad_summary_{step}.csv      # UTF-8 with BOM, CRLF
    {dump_path}/rank{r}/step{step}/{param}.npy       # L1, L2: bool array, True where grad > 0

Headers: L0 `param_name,MD5,max,min,norm,shape`; L1 `param_name,max,min,norm,shape`;
L2 `param_name,"(-inf, b0]",...,"(bn, inf)",=0,max,min,norm,shape`.
"""
import abc
import atexit
import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, List, Optional

import numpy as np

from msprobe.core.dump.native import bucket_stats
from msprobe.core.errors import ConfigError
from msprobe.core.log import logger
from msprobe.core.monitor.files import ensure_dir, write_csv, write_npy_folder
from msprobe.core.paths import atomic_write_json, make_dir, safe_name
from msprobe.core.write_failures import WriteFailures

__all__ = ["GradProbeSettings", "GradSummaryWriter", "ParamGradStats", "host_grad_stats", "interval_labels",
           "summary_header", "INDEX_FILE"]

GRAD_LEVELS = ("L0", "L1", "L2")
INDEX_FILE = "grad_probe_index.json"


def _bound_text(bound) -> str:
    return str(int(bound)) if isinstance(bound, int) else repr(float(bound))


def interval_labels(bounds: list) -> list:
    """Right-closed intervals cut by `bounds`: (-inf, b0], (b0, b1], ..., (bn, inf)."""
    edges = ["-inf"] + [_bound_text(b) for b in bounds] + ["inf"]
    labels = [f"({lo}, {hi}]" for lo, hi in zip(edges[:-2], edges[1:-1])]
    return labels + [f"({edges[-2]}, inf)"]


def summary_header(level: str, bounds: list) -> list:
    if level == "L0":
        return ["param_name", "MD5", "max", "min", "norm", "shape"]
    if level == "L1":
        return ["param_name", "max", "min", "norm", "shape"]
    return ["param_name", *interval_labels(bounds), "=0", "max", "min", "norm", "shape"]


@dataclass
class ParamGradStats:
    """What the adapters compute for one parameter's gradient (plain Python / numpy values)."""
    name: str
    max: float
    min: float
    norm: float
    shape: list
    md5: str = ""
    fractions: list = field(default_factory=list)  # L2: one per interval
    zero_fraction: float = 0.0                     # L2
    direction: Optional[np.ndarray] = None         # L1, L2: grad > 0

    def set_counts(self, at_or_below: list, zeros: int, numel: int) -> None:
        """L2 fractions from the counts of elements <= each bound and of zeros."""
        edges = [0, *(int(c) for c in at_or_below), numel]
        self.fractions = [(b - a) / numel for a, b in zip(edges[:-1], edges[1:])]
        self.zero_fraction = int(zeros) / numel

    def row(self, level: str) -> list:
        tail = [self.max, self.min, self.norm, str(list(self.shape))]
        if level == "L0":
            return [self.name, self.md5, *tail]
        if level == "L1":
            return [self.name, *tail]
        return [self.name, *self.fractions, self.zero_fraction, *tail]


_HOST_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def host_grad_stats(name: str, array: np.ndarray, level: str, bounds: list) -> Optional[ParamGradStats]:
    """The statistics of a gradient held in a host float32/float64 array, from one C pass (bucket_stats in
    msprobe/_native/_stats.c): max, min, norm, and by level the interval counts and the direction;
    None where that pass is not available (other dtypes, an empty array, no compiled extension)."""
    if bucket_stats is None or array.dtype not in _HOST_DTYPES or not array.size:
        return None
    flat = np.ascontiguousarray(array).reshape(-1)
    # bounds rounded to the gradient's dtype, as a framework's `grad <= bound` compares them
    limits = [float(array.dtype.type(b)) for b in bounds] if level == "L2" else []
    direction = np.empty(flat.size, dtype=np.bool_) if level != "L0" else None
    high, low, sumsq, zeros, at_or_below = bucket_stats(flat.ctypes.data, flat.size, flat.itemsize, limits,
                                                        None if direction is None else direction.ctypes.data)
    # widened (or narrowed) to float32 like the values of the framework kernels
    high, low, norm = (float(np.float32(v)) for v in (high, low, math.sqrt(sumsq)))
    stats = ParamGradStats(name=name, max=high, min=low, norm=norm, shape=list(array.shape))
    if direction is not None:
        stats.direction = direction.reshape(array.shape)
    if level == "L2":
        stats.set_counts(list(at_or_below), zeros, flat.size)
    return stats


@dataclass
class GradProbeSettings:
    """The grad_probe part of a config.json (task "grad_probe")."""
    dump_path: str
    level: str = "L1"
    param_list: list = field(default_factory=list)
    bounds: list = field(default_factory=lambda: [-1, 0, 1])
    ranks: list = field(default_factory=list)
    steps: list = field(default_factory=list)

    @classmethod
    def from_config(cls, config) -> "GradProbeSettings":
        """From a `DebuggerConfig` (msprobe.core.config.load_config) whose task is grad_probe."""
        if config.task != "grad_probe":
            raise ConfigError(f"grad_probe needs task \"grad_probe\" in the config, got task \"{config.task}\".")
        section = config.section
        settings = cls(dump_path=config.dump_path, level=section.get("grad_level", "L1"),
                       param_list=list(section.get("param_list", [])), bounds=list(section.get("bounds", [-1, 0, 1])),
                       ranks=list(config.rank), steps=list(config.step))
        if settings.level not in GRAD_LEVELS:
            raise ConfigError(f"grad_probe.grad_level must be one of {list(GRAD_LEVELS)}, got {settings.level!r}.")
        return settings

    def wants_rank(self, rank: int) -> bool:
        return not self.ranks or rank in self.ranks

    def wants_step(self, step: int) -> bool:
        return not self.steps or step in self.steps

    def wants_param(self, name: str) -> bool:
        return not self.param_list or name in self.param_list

    @property
    def needs_direction(self) -> bool:
        return self.level in ("L1", "L2")


class GradSummaryWriter:
    """Writes one rank's grad_summary CSVs and direction files in a background thread."""

    def __init__(self, settings: GradProbeSettings, rank: int):
        self.settings = settings
        self.rank = rank
        self.rank_dir = os.path.join(make_dir(settings.dump_path, what="dump_path"), f"rank{rank}")
        if os.path.isdir(self.rank_dir) and os.listdir(self.rank_dir):
            logger.warning(f"grad_probe: '{self.rank_dir}' is not empty; files of the same steps are overwritten.")
        ensure_dir(self.rank_dir)
        self.header = summary_header(settings.level, settings.bounds)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="msprobe-grad-probe")
        self._pending: list = []
        self.steps_written: List[int] = []
        self.failures = WriteFailures("msprobe grad_probe")

    def submit(self, step: int, stats: list) -> None:
        """Queue the files of one step; `stats` is a list of ParamGradStats in parameter order."""
        self.steps_written.append(step)
        self._pending = [f for f in self._pending if not f.done()]
        self._pending.append(self._pool.submit(self._write_step, step, stats))

    def _write_step(self, step: int, stats: list) -> None:
        level = self.settings.level
        path = os.path.join(self.rank_dir, f"grad_summary_{step}.csv")
        try:
            write_csv(path, self.header, [s.row(level) for s in stats], bom=True)
        except OSError as exc:  # a full disk: logged once per kind and step, never raised into training
            self.failures.record(step, "summary files", exc, path)
        if self.settings.needs_direction:
            path = os.path.join(self.rank_dir, f"step{step}")
            try:
                write_npy_folder(path, [(f"{safe_name(s.name)}.npy", s.direction) for s in stats])
            except OSError as exc:
                self.failures.record(step, "direction folders", exc, path)
        self.failures.settle()

    def flush(self) -> None:
        """Wait for every queued step (a failed write was logged and counted by the step's job)."""
        pending, self._pending = self._pending, []
        for future in pending:
            future.result()

    def close(self) -> None:
        self.flush()
        self._pool.shutdown(wait=True)


class GradProbeBase(abc.ABC):
    """What the frameworks' GradProbe classes share: settings from a config (path or DebuggerConfig), the step
    counter, and the index file written when the probe finishes (subclasses list their parameter names)."""

    def __init__(self, config) -> None:
        if isinstance(config, (str, os.PathLike)):
            from msprobe.core.config import load_config
            config = load_config(config)
        self.settings = GradProbeSettings.from_config(config)
        self.step = 0
        self.session: Any = None
        self.writer: Optional[GradSummaryWriter] = None

    @abc.abstractmethod
    def param_names(self) -> list:
        """The names of the watched parameters (for the index file)."""

    def _open(self, rank: int, install) -> bool:
        """Start writing for `rank` (when selected) with the hooks `install(session)` adds; False when this
        rank is not in the config's `rank`."""
        if not self.settings.wants_rank(rank):
            logger.info(f"grad_probe: rank {rank} is not in 'rank'; nothing is collected here.")
            return False
        from msprobe.core.dump.session import HookSession
        self.writer = GradSummaryWriter(self.settings, rank)
        session = HookSession()
        with session.installing():
            install(session)
            atexit.register(self._finish)
            session.callback(atexit.unregister, self._finish)
        self.session = session
        return True

    def _finish(self) -> None:
        if self.writer is None:
            return
        writer, self.writer = self.writer, None
        writer.close()
        path = os.path.join(writer.rank_dir, INDEX_FILE)
        try:
            atomic_write_json(path, {"grad_level": self.settings.level, "bounds": self.settings.bounds,
                                     "steps": writer.steps_written, "params": self.param_names()})
        except OSError as exc:  # stop() returns: training goes on whatever the disk says
            writer.failures.record(self.step, "index file", exc, path)
            writer.failures.settle()
        writer.failures.report()
