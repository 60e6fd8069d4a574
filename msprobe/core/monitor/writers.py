"""Monitor outputs of one run directory: csv files per statistic kind, TensorBoard events, or nothing (api).

CSV (no BOM), one file per kind and record window `{prefix}_{start}-{end}.csv`:
  parameters (grad_reduced, grad_unreduced, exp_avg, exp_avg_sq, param, ...): `vpp_stage,param_name,step,<ops>`
  update: the same plus `ratio` (update norm / parameter norm before the update)
  actv: `vpp_stage,module_name,step,input.<op>...,output.<op>...`; actv_grad: `...,input_grad.<op>...,output_grad.<op>...`
  other (collectives): `param_name,step,<ops>`
Beside them `global_metrics.csv` (step, grad_norm, param_norm, update_norm, update_ratio) and `alerts.csv`.
TensorBoard tags: `{vpp}:{name}/rank{r}/{io or prefix}_{op}`.
"""
import csv
import math
import os

from msprobe.core.csv_cells import SafeCsvWriter
from msprobe.core.monitor.files import ensure_dir, event_writer
from msprobe.core.paths import FILE_MODE

__all__ = ["CsvWriter", "TensorBoardWriter", "GLOBAL_FILE", "ALERTS_FILE", "MODULE_IOS"]

GLOBAL_FILE = "global_metrics.csv"
ALERTS_FILE = "alerts.csv"
GLOBAL_COLUMNS = ["step", "grad_norm", "param_norm", "update_norm", "update_ratio"]
ALERT_COLUMNS = ["step", "rule", "prefix", "name", "io", "op", "value", "baseline", "call_id", "message"]
MODULE_IOS = {"actv": ("input", "output"), "actv_grad": ("input_grad", "output_grad")}


def _fmt(value, ndigits):
    if value is None:
        return "nan"
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        return repr(round(value, ndigits))
    return value


class _AppendCsv:
    """A CSV file of this run directory; rows are appended step by step."""

    def __init__(self, path, header, existing=False):
        self.path = path
        if not existing:  # 0640 from the start, whatever the umask: never readable by others, not even briefly
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
            os.fchmod(descriptor, FILE_MODE)
            with os.fdopen(descriptor, "w", newline="", encoding="utf-8") as handle:
                SafeCsvWriter(handle).writerow(header)

    def append(self, rows):
        with open(self.path, "a", newline="", encoding="utf-8") as handle:
            SafeCsvWriter(handle).writerows(rows)


def _header_of(path):
    with open(path, newline="", encoding="utf-8") as handle:
        return next(csv.reader(handle), None)


def _open_csv(run_dir, stem, header, suffix=0):
    """`{stem}.csv` (`{stem}_{suffix}.csv` when suffix > 0) in run_dir, ready for appending.

    A file of that name exists only when a resumed run (append_output) writes into an earlier run's directory:
    with the same header it is continued, so a record window or global_metrics.csv stays one file; otherwise
    (other ops, or not a plain file) the next free `_{n}` name is taken. An existing file is never truncated.
    """
    for number in range(suffix, suffix + 10_000):
        path = os.path.join(run_dir, f"{stem}_{number}.csv" if number else f"{stem}.csv")
        if not os.path.lexists(path):
            return _AppendCsv(path, header)
        if os.path.isfile(path) and not os.path.islink(path):
            try:
                if _header_of(path) == [str(cell) for cell in header]:
                    return _AppendCsv(path, header, existing=True)
            except (OSError, UnicodeDecodeError, csv.Error):
                pass  # unreadable: leave it alone, write beside it
    raise FileExistsError(f"monitor: no free csv name for '{stem}' in '{run_dir}'.")


class CsvWriter:
    def __init__(self, run_dir, ops, ndigits, steps_per_file):
        self.run_dir = ensure_dir(run_dir)
        self.ops = list(ops)
        self.ndigits = ndigits
        self.steps_per_file = steps_per_file
        self._files = {}
        self.generation = 0  # bumped when the ops change: new files with the new columns
        self._global = None
        self._alerts = None

    def _file(self, prefix, step, header):
        first = step - step % self.steps_per_file
        key = (prefix, first)
        if key not in self._files:
            self._files[key] = _open_csv(self.run_dir, f"{prefix}_{first}-{first + self.steps_per_file - 1}",
                                         header, self.generation)
        return self._files[key]

    def write_step(self, step, records):
        by_prefix = {}
        for record in records:
            by_prefix.setdefault(record.prefix, []).append(record)
        nd = self.ndigits
        for prefix, group in by_prefix.items():
            if prefix in MODULE_IOS:
                ios = MODULE_IOS[prefix]
                header = ["vpp_stage", "module_name", "step"] + [f"{io}.{op}" for io in ios for op in self.ops]
                rows, index = [], {}
                for record in group:
                    key = (record.vpp_stage, record.name)
                    if key not in index:
                        index[key] = len(rows)
                        rows.append({})
                    rows[index[key]][record.io] = record.values
                lines = []
                for (vpp, name), position in index.items():
                    cells = rows[position]
                    lines.append([vpp, name, step] + [_fmt(cells.get(io, {}).get(op), nd) for io in ios for op in self.ops])
                self._file(prefix, step, header).append(lines)
            elif prefix == "other":
                header = ["param_name", "step"] + self.ops
                self._file(prefix, step, header).append(
                    [[r.name, step] + [_fmt(r.values.get(op), nd) for op in self.ops] for r in group])
            else:
                extra = ["ratio"] if prefix == "update" else []
                header = ["vpp_stage", "param_name", "step"] + self.ops + extra
                self._file(prefix, step, header).append(
                    [[r.vpp_stage, r.name, step] + [_fmt(r.values.get(op), nd) for op in self.ops + extra] for r in group])

    def write_global(self, step, values):
        if self._global is None:
            self._global = _open_csv(self.run_dir, GLOBAL_FILE[:-len(".csv")], GLOBAL_COLUMNS)
        self._global.append([[step] + [_fmt(values.get(c), 12) for c in GLOBAL_COLUMNS[1:]]])

    def write_alerts(self, alerts):
        if not alerts:
            return
        if self._alerts is None:
            self._alerts = _open_csv(self.run_dir, ALERTS_FILE[:-len(".csv")], ALERT_COLUMNS)
        self._alerts.append([[a.step, a.rule, a.record.prefix, a.record.name, a.record.io, a.op, _fmt(a.value, 12),
                              _fmt(a.baseline, 12), a.record.call_id, a.message] for a in alerts])

    def close(self):
        pass


class TensorBoardWriter:
    """Scalars through tensorboard's own event-file writer (no torch needed)."""

    def __init__(self, run_dir, ops, rank):
        self._writer = event_writer(run_dir)
        self.ops = list(ops)
        self.rank = rank

    def _scalars(self, step, pairs):
        import time

        from tensorboard.compat.proto import event_pb2, summary_pb2

        summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=float(value))
                                             for tag, value in pairs if value is not None])
        self._writer.add_event(event_pb2.Event(wall_time=time.time(), step=step, summary=summary))

    def write_step(self, step, records):
        pairs = []
        for record in records:
            tag = record.tag(self.rank)
            for op in self.ops:
                if op in record.values:
                    pairs.append((f"{tag}_{op}", record.values[op]))
            if record.prefix == "update" and "ratio" in record.values:
                pairs.append((f"{tag}_ratio", record.values["ratio"]))
        self._scalars(step, pairs)

    def write_global(self, step, values):
        self._scalars(step, [(f"global/rank{self.rank}/{k}", v) for k, v in values.items() if v is not None])

    def write_alerts(self, alerts):
        pass

    def close(self):
        self._writer.close()
