"""Write a job's dump statistics into `trend.duckdb`, one row per (step, rank, tensor, statistic); incremental.

    with TrendStore("out/trend.duckdb") as store:
        added = store.ingest_dump_root("dump")        # [(step, rank, rows), ...] read this time
        added = store.ingest_monitor_root("monitor_output")   # TrainerMon's csv output, the same way
        store.query("SELECT ...")                     # a pandas DataFrame

Tables (see docs/scale.md for example questions):
  stats     step INTEGER, rank INTEGER, source VARCHAR (the dump root), call VARCHAR (dump.json entry),
            module VARCHAR (the entry without its call counter: 'Functional.linear.forward',
            'Module.layers.0.Linear.forward'), tensor VARCHAR (row name, e.g. '...forward.output.0'),
            role VARCHAR (input, output, parameters, parameters_grad), dtype VARCHAR,
            stat VARCHAR (max, min, mean, norm), value DOUBLE (NaN and +-inf kept)
  ingested  source, step, rank, path, rows, ingested_at: one row per (step, rank) dump read
Re-running adds only the (source, step, rank) dumps not yet in `ingested`; rows already stored are never
rewritten. TrainerMon's csv output (monitor_rows.py) is stored the same way, one (source, step, rank) at a
time, source being the monitor output root. duckdb is an optional extra: `pip install msprobe[trend]`.
"""
import os
import time
from typing import List

import numpy as np

from msprobe.core.errors import PathError, UnsupportedError
from msprobe.core.io.load import load_dump
from msprobe.core.job_tree import MAX_FOLDER_NUMBER, job_folders
from msprobe.core.log import logger
from msprobe.core.naming import EntryName
from msprobe.core.paths import FILE_MODE

__all__ = ["TrendStore", "STATS", "TREND_FILE"]

TREND_FILE = "trend.duckdb"
STATS = ("max", "min", "mean", "norm")
_COLUMNS = ("step", "rank", "source", "call", "module", "tensor", "role", "dtype", "stat", "value")
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS stats (step INTEGER, rank INTEGER, source VARCHAR, call VARCHAR, module VARCHAR, "
    "tensor VARCHAR, role VARCHAR, dtype VARCHAR, stat VARCHAR, value DOUBLE)",
    "CREATE TABLE IF NOT EXISTS ingested (source VARCHAR, step INTEGER, rank INTEGER, path VARCHAR, "
    "rows BIGINT, ingested_at DOUBLE)",
)


def _duckdb():
    try:
        import duckdb
    except ImportError:
        raise UnsupportedError("the trend store needs duckdb: pip install 'msprobe[trend]' "
                               "(or pip install duckdb).") from None
    return duckdb


def _module_of(entry) -> str:
    parsed = EntryName.parse(entry)
    if parsed is None:
        return str(entry)
    return parsed.op_name if parsed.index else str(parsed)


# the files DuckDB writes beside the database: its write-ahead log and its spill folder
_DUCKDB_SIDE_FILES = ("", ".wal", ".tmp")


def _refuse_links(path: str) -> None:
    """DuckDB opens its files following symlinks: a link at any of them (dangling too) is refused."""
    for suffix in _DUCKDB_SIDE_FILES:
        if os.path.islink(path + suffix):
            raise PathError(f"'{path + suffix}' is a symbolic link: the trend store is never written through "
                            "one (remove it or choose another -o).")


def _storable(step: int, rank: int, where: str) -> bool:
    """Steps and ranks are INTEGER columns: a number past 2^31 - 1 is skipped with a warning naming it."""
    if 0 <= step <= MAX_FOLDER_NUMBER and 0 <= rank <= MAX_FOLDER_NUMBER:
        return True
    logger.warning("%s: step %d, rank %d is skipped: steps and ranks are stored as integers up to %d.", where,
                   step, rank, MAX_FOLDER_NUMBER)
    return False


class TrendStore:
    """The store at `path`. While it is open the process umask also masks group write and every bit for
    others, so the database and the write-ahead log DuckDB creates are 0640 from their first byte (DuckDB takes
    no file mode); the umask is restored at close."""

    def __init__(self, path: str):
        self.path = path
        _refuse_links(path)
        self._umask = os.umask(0o027)
        os.umask(self._umask | 0o027)
        try:
            self.con = _duckdb().connect(path)
            for statement in _SCHEMA:
                self.con.execute(statement)
        except BaseException:
            os.umask(self._umask)
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        try:
            self.con.close()
        finally:
            os.umask(self._umask)
        if os.path.isfile(self.path) and not os.path.islink(self.path):
            os.chmod(self.path, FILE_MODE)  # an older store made before its mode was set at creation

    def query(self, sql: str, params=None):
        return self.con.execute(sql, params or []).df()

    def known(self, source) -> set:
        rows = self.con.execute("SELECT step, rank FROM ingested WHERE source = ?", [source]).fetchall()
        return {(int(step), int(rank)) for step, rank in rows}

    def ingest_dump_root(self, root: str) -> List[tuple]:
        """Adds every (step, rank) dump under `root` not yet stored; returns those added."""
        source = os.path.abspath(root)
        known = self.known(source)
        added = []
        for where in job_folders(root):
            if (where.step, where.rank) in known or not _storable(where.step, where.rank, where.folder):
                continue
            rows = self._ingest_one(source, where)
            added.append((where.step, where.rank, rows))
        return added

    def ingest_monitor_root(self, root: str) -> List[tuple]:
        """Adds every (step, rank) of TrainerMon's csv output under `root` not yet stored; returns those added."""
        import pandas as pd

        from msprobe.core.trend.monitor_rows import monitor_runs, steps_of

        source = os.path.abspath(root)
        known = self.known(source)
        added = []
        for rank, run_dir in monitor_runs(root):
            for step, rows in steps_of(run_dir):
                if (step, rank) in known or not _storable(step, rank, run_dir):
                    continue
                frame = pd.DataFrame(rows, columns=_COLUMNS[3:])
                frame.insert(0, "source", source)
                frame.insert(0, "rank", np.int32(rank))
                frame.insert(0, "step", np.int32(step))
                self._insert(frame, source, step, rank, run_dir)
                known.add((step, rank))
                added.append((step, rank, len(frame)))
        return added

    def _ingest_one(self, source, where) -> int:
        import pandas as pd

        columns = load_dump(where.dump_json).columns
        if not columns:
            frame = pd.DataFrame(columns=list(_COLUMNS))
        else:
            tensor_rows = [i for i, kind in enumerate(columns["kind"]) if kind == "tensor"]
            names = [columns["name"][i] for i in tensor_rows]
            entries = [columns["entry"][i] for i in tensor_rows]
            count = len(tensor_rows)
            frame = pd.DataFrame({
                "step": np.full(count * len(STATS), where.step, dtype=np.int32),
                "rank": np.full(count * len(STATS), where.rank, dtype=np.int32),
                "source": source,
                "call": entries * len(STATS),
                "module": [_module_of(entry) for entry in entries] * len(STATS),
                "tensor": names * len(STATS),
                "role": [columns["role"][i] for i in tensor_rows] * len(STATS),
                "dtype": [str(columns["dtype"][i]) for i in tensor_rows] * len(STATS),
                "stat": np.repeat(np.array(STATS, dtype=object), count),
                "value": np.concatenate([np.asarray([columns[s][i] for i in tensor_rows], dtype=float)
                                         for s in STATS]) if count else np.zeros(0),
            })
        self._insert(frame, source, where.step, where.rank, where.dump_json)
        return len(frame)

    def _insert(self, frame, source, step, rank, path):
        """One (source, step, rank) batch of rows and its `ingested` row, in one transaction."""
        self.con.execute("BEGIN TRANSACTION")
        try:
            self.con.register("trend_batch", frame)
            self.con.execute("INSERT INTO stats SELECT * FROM trend_batch")
            self.con.unregister("trend_batch")
            self.con.execute("INSERT INTO ingested VALUES (?, ?, ?, ?, ?, ?)",
                             [source, step, rank, path, len(frame), time.time()])
            self.con.execute("COMMIT")
        except Exception:
            self.con.execute("ROLLBACK")
            raise
