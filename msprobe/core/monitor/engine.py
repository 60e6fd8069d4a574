"""The framework-neutral half of TrainerMon: which steps to collect, where results go, which alerts to raise.

An adapter (msprobe/pytorch/monitor/, msprobe/mindspore/monitor/) hooks the model and optimizer, turns
tensors into `StatRecord`s (one device-to-host transfer per step) and calls `finish_step(records, global)`
after each optimizer step. The engine writes csv / TensorBoard / nothing (api), runs the anomaly rules,
prints alerts, keeps `anomaly.json`, and draws the plots when the run ends.

Steps: step N (from 0) is the N-th optimizer step. Collected steps are start_step, start_step + step_interval,
... at most collect_times of them. Dynamic mode (env DYNAMIC_MONITOR=True): collection starts at the step
after the config file says `"switch": true` (first time, or after the file changed) and, after
collect_times steps, the engine writes `"switch": false` back into the file.

Run directory: `{output_root}/{Mon DD_HH-MM-SS}-rank{r}-{id}`, new for each run, unless the config's
`append_output: [start, end]` names a time range holding one of this rank's directories: a resumed run then
writes into the latest such directory (csv files of a window that exists are continued, TensorBoard adds an
event file) and keeps the earlier run's entries in anomaly.json.

A write that fails (a full disk) never reaches training: the first failure of each kind in a step is logged
as one `[ERROR]` line, the rest are counted, and close() says what was not written (as the dump does).
"""
import json
import os
from typing import Optional

from msprobe.core.log import logger
from msprobe.core.monitor.anomaly import AnomalyDetector
from msprobe.core.monitor.files import ensure_dir, write_bytes
from msprobe.core.monitor.monitor_config import load_monitor_config
from msprobe.core.monitor.run_dirs import find_resume_dir, run_dir_name
from msprobe.core.monitor.writers import CsvWriter, TensorBoardWriter
from msprobe.core.write_failures import WriteFailures

__all__ = ["MonitorEngine", "output_root", "ANOMALY_DIR"]

ANOMALY_DIR = "anomaly_detected"


def output_root() -> str:
    return os.path.abspath(os.environ.get("MONITOR_OUTPUT_DIR", "./monitor_output"))


def _dynamic_mode() -> bool:
    return os.environ.get("DYNAMIC_MONITOR", "").strip().lower() == "true"


def _read_anomalies(path: str) -> dict:
    if not os.path.isfile(path) or os.path.islink(path):
        return {}
    try:
        with open(path, encoding="utf-8") as handle:
            entries = json.load(handle)
    except (OSError, ValueError) as exc:
        logger.warning(f"monitor: earlier anomaly file '{path}' is unreadable ({exc}); it is replaced.")
        return {}
    return entries if isinstance(entries, dict) else {}


class MonitorEngine:
    def __init__(self, config, rank: int = 0):
        self.config = config
        self.rank = rank
        self.step = 0
        self.collected = 0
        self.dynamic = _dynamic_mode()
        self._config_mtime = None
        self._dynamic_start = None  # first step collected in dynamic mode
        if self.dynamic and config.path:
            self._config_mtime = os.path.getmtime(config.path)
            if config.switch:
                self._dynamic_start = 1  # the step after the config was read
        self.resumed = False
        self.run_dir = self._choose_run_dir()
        self.writer = self._make_writer()
        self.detector = AnomalyDetector(config.rules, rank=rank)
        self.latest: dict = {}  # api format: prefix -> {tag: {op: value}} of the last collected step
        self.finished = False
        self.closed = False
        self._earlier_anomalies: Optional[dict] = None  # anomaly.json entries of the run a resumed run continues
        self.failures = WriteFailures("msprobe monitor")

    def _write(self, step, what, path, write, *args) -> None:
        """`write(*args)`; an OSError is logged once per kind and step and counted, never raised."""
        try:
            write(*args)
        except OSError as exc:
            self.failures.record(step, what, exc, path)
            self.failures.settle()

    def _choose_run_dir(self) -> str:
        root = output_root()
        if self.config.append_output:
            start, end = self.config.append_output
            found = find_resume_dir(root, self.rank, start, end)
            if found:
                self.resumed = True
                logger.info(f"monitor: append_output: rank {self.rank} continues '{found}'.")
                return found
            logger.info(f"monitor: append_output: no run directory of rank {self.rank} in '{root}' between "
                        f"{start} and {end}; writing to a new one.")
        return os.path.join(root, run_dir_name(self.rank))

    def _make_writer(self):
        fmt = self.config.format
        if fmt == "csv":
            return CsvWriter(self.run_dir, self.config.ops, self.config.ndigits, self.config.step_count_per_record)
        if fmt == "tensorboard":
            return TensorBoardWriter(self.run_dir, self.config.ops, self.rank)
        return None

    # -- schedule ---------------------------------------------------------------------------
    def collecting(self, step=None) -> bool:
        """Whether step `step` (default: the current one) is collected."""
        step = self.step if step is None else step
        cfg = self.config
        if self.collected >= cfg.collect_times:
            return False
        if self.dynamic:
            return self._dynamic_start is not None and step >= self._dynamic_start and \
                (step - self._dynamic_start) % cfg.step_interval == 0
        return step >= cfg.start_step and (step - cfg.start_step) % cfg.step_interval == 0

    @property
    def done(self) -> bool:
        """No later step will be collected (static mode only; dynamic mode can always restart)."""
        return not self.dynamic and self.collected >= self.config.collect_times

    def _poll_dynamic(self) -> None:
        path = self.config.path
        try:
            mtime = os.path.getmtime(path)
        except OSError:
            return
        if mtime == self._config_mtime and self._dynamic_start is not None:
            return
        changed = mtime != self._config_mtime
        self._config_mtime = mtime
        if not changed:
            return
        try:
            fresh = load_monitor_config(path)
        except Exception as exc:  # noqa: BLE001 - a half-edited file must not stop training
            logger.warning(f"monitor: config '{path}' could not be reloaded ({exc}); keeping the current one.")
            return
        if fresh.switch and self._dynamic_start is None:
            fresh.values["format"] = self.config.format  # the run directory keeps its writer
            self.config = fresh
            self.detector = AnomalyDetector(fresh.rules, rank=self.rank)
            self.collected = 0
            self._dynamic_start = self.step  # finish_step has already moved to the next step
            logger.info(f"monitor: switch on in '{path}'; collecting from step {self._dynamic_start}.")

    def _switch_off(self) -> None:
        path = self.config.path
        self._dynamic_start = None
        try:
            with open(path, encoding="utf-8") as handle:
                raw = json.load(handle)
            raw["switch"] = False
            write_bytes(path, json.dumps(raw, indent=4).encode("utf-8"))
            self._config_mtime = os.path.getmtime(path)
        except (OSError, ValueError) as exc:
            logger.warning(f"monitor: could not write switch=false into '{path}': {exc}")

    # -- per step -----------------------------------------------------------------------------
    def finish_step(self, records: list, global_values: Optional[dict] = None) -> list:
        """Write and judge the collected step's records; advance to the next step. Returns its alerts."""
        step = self.step
        alerts = []
        if records or global_values:
            self.collected += 1
            if self.writer is not None:
                self._write(step, "statistics files", self.run_dir, self.writer.write_step, step, records)
                if global_values:
                    self._write(step, "global metrics", self.run_dir, self.writer.write_global, step, global_values)
            self.latest = {}
            for record in records:
                self.latest.setdefault(record.prefix, {})[record.tag(self.rank)] = dict(record.values)
            alerts = self.detector.observe(step, records)
            for alert in alerts:
                logger.warning(alert.message)
            if alerts and self.writer is not None:
                self._write(step, "alerts", self.run_dir, self.writer.write_alerts, alerts)
            if alerts and self.config.alert["dump"]:
                self._write(step, "anomaly.json", os.path.join(output_root(), ANOMALY_DIR), self._dump_anomalies)
            if self.collected >= self.config.collect_times:
                logger.info(f"monitor: collected {self.collected} step(s); finish monitor.")
                if self.dynamic:
                    self._switch_off()
        self.step += 1
        if self.dynamic:
            self._poll_dynamic()
        return alerts

    def _dump_anomalies(self) -> None:
        directory = ensure_dir(os.path.join(output_root(), ANOMALY_DIR, f"rank{self.rank}"))
        path = os.path.join(directory, "anomaly.json")
        if self._earlier_anomalies is None:
            # a resumed run keeps the entries of the run it continues; a new run starts the file afresh
            self._earlier_anomalies = _read_anomalies(path) if self.resumed else {}
        entries = dict(self._earlier_anomalies)
        for alert in self.detector.alerts:
            data = alert.as_dict()
            entries[f"{data['tag_name']}_step_{alert.step}_call_{data['call_id']}"] = data
        write_bytes(path, json.dumps(entries, indent=1).encode("utf-8"))

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.writer is not None:
            self._write(self.step, "statistics files", self.run_dir, self.writer.close)
        if self.config.format == "csv" and self.config.plots and os.path.isdir(self.run_dir):
            from msprobe.core.monitor.plots import plot_run

            try:
                self._write(self.step, "plots", self.run_dir, plot_run, self.run_dir)
            except ImportError:
                logger.warning("monitor: matplotlib is not installed; no plots drawn (pip install matplotlib).")
        self.failures.report()
