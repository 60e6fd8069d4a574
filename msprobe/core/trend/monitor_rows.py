"""Read TrainerMon's csv output (monitor run directories) as trend-store rows, per (rank, step).

    runs = monitor_runs("monitor_output")          # [(rank, run_dir)]: `{stamp}-rank{r}-{id}` folders
    for step, rows in steps_of(run_dir): ...       # rows: (call, module, tensor, role, dtype, stat, value)

A run directory holds one csv per statistic kind and record window, `{prefix}_{start}-{end}[_{n}].csv`
(monitor/writers.py): parameter kinds (grad_reduced, grad_unreduced, param, exp_avg, exp_avg_sq, update, ...)
`vpp_stage,param_name,step,<ops>[,ratio]`; activations (actv, actv_grad) `vpp_stage,module_name,step,
<io>.<op>...`; collectives (other) `param_name,step,<ops>`; and `global_metrics.csv` (step, grad_norm, ...).
Rows become: call and module = the parameter or module name (with `{vpp}:` when vpp_stage is not 0),
tensor = `{prefix}/{name}` (`.{io}` for activations), role = the prefix (`actv.input`, ... for activations),
stat = the op (min, max, norm, mean, zeros, nans, ratio), dtype empty (the monitor records none).
TensorBoard event files and the api format are not read: monitor with `"format": "csv"` to feed the trend
store.
"""
import csv
import os
import re
from typing import Dict, Iterator, List, Tuple

from msprobe.core.errors import ParseError
from msprobe.core.monitor.run_dirs import RUN_DIR_PATTERN
from msprobe.core.monitor.writers import ALERTS_FILE, GLOBAL_FILE, MODULE_IOS

__all__ = ["monitor_runs", "steps_of", "is_monitor_output"]

_WINDOW_FILE = re.compile(r"^(?P<prefix>[A-Za-z_]+?)_\d+-\d+(?:_\d+)?\.csv$")
_FIXED = {"vpp_stage", "param_name", "module_name", "step"}


def _run_match(path):
    return RUN_DIR_PATTERN.match(os.path.basename(os.path.normpath(path)))


def monitor_runs(root) -> List[Tuple[int, str]]:
    """[(rank, run dir)] under a monitor output root (or `root` itself when it is one run directory)."""
    match = _run_match(root)
    if match and os.path.isdir(root):
        return [(int(match.group(2)), root)]
    runs = []
    for name in sorted(os.listdir(root)):
        full = os.path.join(root, name)
        match = RUN_DIR_PATTERN.match(name)
        if match and os.path.isdir(full) and not os.path.islink(full):
            runs.append((int(match.group(2)), full))
    return runs


def is_monitor_output(root) -> bool:
    return bool(os.path.isdir(root) and monitor_runs(root))


def _number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return float("nan")


def _read(path):
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            rows = list(csv.reader(handle))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ParseError(f"monitor csv '{path}' cannot be read: {exc}") from None
    return (rows[0], rows[1:]) if rows else ([], [])


def _file_rows(prefix, header, rows) -> Iterator[Tuple[int, tuple]]:
    """(step, store row) of one window csv."""
    column = {name: i for i, name in enumerate(header)}
    if "step" not in column:
        return
    name_at = column.get("param_name", column.get("module_name"))
    vpp_at = column.get("vpp_stage")
    values = [(i, name) for i, name in enumerate(header) if name not in _FIXED]
    for row in rows:
        if len(row) != len(header) or not row[column["step"]].lstrip("-").isdigit():
            continue  # a line cut short by a run that stopped mid-write
        step, name = int(row[column["step"]]), row[name_at] if name_at is not None else prefix
        if vpp_at is not None and row[vpp_at] not in ("", "0"):
            name = f"{row[vpp_at]}:{name}"
        for i, label in values:
            io, _, op = label.rpartition(".")
            if prefix in MODULE_IOS and io:
                yield step, (name, name, f"{prefix}/{name}.{io}", f"{prefix}.{io}", "", op, _number(row[i]))
            else:
                yield step, (name, name, f"{prefix}/{name}", prefix, "", label, _number(row[i]))


def _global_rows(header, rows):
    for row in rows:
        if len(row) != len(header) or not row[0].isdigit():
            continue
        for label, cell in zip(header[1:], row[1:]):
            yield int(row[0]), ("global", "global", f"global/{label}", "global", "", label, _number(cell))


def steps_of(run_dir) -> List[Tuple[int, List[tuple]]]:
    """[(step, rows)] of one run directory's csv files, by step (files in name order, rows in file order)."""
    by_step: Dict[int, List[tuple]] = {}
    for name in sorted(os.listdir(run_dir)):
        path = os.path.join(run_dir, name)
        if not name.endswith(".csv") or name == ALERTS_FILE or not os.path.isfile(path) or os.path.islink(path):
            continue
        header, rows = _read(path)
        if name == GLOBAL_FILE:
            found = _global_rows(header, rows)
        else:
            match = _WINDOW_FILE.match(name)
            if match is None:
                continue
            found = _file_rows(match.group("prefix"), header, rows)
        for step, row in found:
            by_step.setdefault(step, []).append(row)
    return sorted(by_step.items())
