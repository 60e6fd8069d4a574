"""Convert monitor csv output to TensorBoard event files.

    from msprobe.core.monitor.csv2tb import csv2tensorboard_by_step   # PyTorch's monitor re-exports it
    csv2tensorboard_by_step("monitor_output", "Dec03_21-34-40", "Dec03_21-34-42", process_num=1,
                            data_type_list=["param"], output_dirpath=None)

Run directories `{time}-rank{r}-{id}` whose time lies in [time_start, time_end] (same year assumed, compared
as month/day/time) are converted: `{out}/rank{r}/{data_type}/events...` with one scalar per csv cell, tag
`vp{vpp}:{name}/{column}` at the row's step. Data types: the csv prefixes (actv, actv_grad, grad_reduced,
grad_unreduced, exp_avg, exp_avg_sq, param, update, other, or an optimizer state's key).
"""
import os
import re
import time
from concurrent.futures import ProcessPoolExecutor

from msprobe.core.errors import ConfigError
from msprobe.core.log import logger
from msprobe.core.monitor.files import ensure_dir, event_writer, read_csv_table
from msprobe.core.monitor.run_dirs import RUN_DIR_PATTERN, parse_stamp
from msprobe.core.paths import check_path

__all__ = ["csv2tensorboard_by_step", "parse_run_time"]

_CSV = re.compile(r"^(.+)_(\d+)-(\d+)(?:_\d+)?\.csv$")


def parse_run_time(text):
    """(month, day, hour, minute, second) of a run-directory stamp, read as the monitor writes them (English
    month names whatever the locale)."""
    stamp = parse_stamp(text)
    if stamp is None:
        raise ConfigError(f"time stamp {text!r} is not of the form 'Dec03_21-34-40'.")
    return stamp


def _int(text):
    try:
        return int(text)
    except ValueError:
        return None


def _convert_rank(run_dir, out_dir, data_types):
    from tensorboard.compat.proto import event_pb2, summary_pb2

    writers = {}
    count = 0
    for name in sorted(os.listdir(run_dir)):
        match = _CSV.match(name)
        if not match:
            continue
        data_type = match.group(1)
        if data_types and data_type not in data_types:
            continue
        header, rows = read_csv_table(os.path.join(run_dir, name), what="monitor csv")
        if not header:
            continue
        has_vpp = header[0] == "vpp_stage"
        first_value = 3 if has_vpp else 2
        if len(header) < first_value:
            continue
        writer = writers.get(data_type)
        if writer is None:
            writer = writers[data_type] = event_writer(os.path.join(out_dir, data_type))
        for row in rows:
            step = _int(row[first_value - 1])
            if step is None:
                continue
            vpp, tensor_name = (row[0], row[1]) if has_vpp else ("0", row[0])
            values = []
            for column, cell in zip(header[first_value:], row[first_value:]):
                try:
                    values.append(summary_pb2.Summary.Value(tag=f"vp{vpp}:{tensor_name}/{column}", simple_value=float(cell)))
                except ValueError:
                    continue
            count += len(values)
            writer.add_event(event_pb2.Event(wall_time=time.time(), step=step, summary=summary_pb2.Summary(value=values)))
    for writer in writers.values():
        writer.close()
    return count


def csv2tensorboard_by_step(monitor_path, time_start, time_end, process_num=1, data_type_list=None,
                            output_dirpath=None):
    """Convert the runs in [time_start, time_end]; returns the output directory."""
    root = check_path(monitor_path, kind="dir", what="monitor_path")
    start, end = parse_run_time(time_start), parse_run_time(time_end)
    if start > end:
        raise ConfigError(f"time_start {time_start} is after time_end {time_end}.")
    if not isinstance(process_num, int) or process_num < 1:
        raise ConfigError(f"process_num must be an integer >= 1, got {process_num!r}.")
    runs = []
    for name in sorted(os.listdir(root)):
        match = RUN_DIR_PATTERN.match(name)
        if match and start <= parse_run_time(match.group(1)) <= end:
            runs.append((os.path.join(root, name), int(match.group(2))))
    if not runs:
        raise ConfigError(f"no monitor run directory in '{root}' between {time_start} and {time_end}.")
    out = os.path.abspath(output_dirpath or f"{time.strftime('%b%d_%H-%M-%S')}_csv2tensorboard_by_step")
    ensure_dir(out)
    jobs = [(run_dir, os.path.join(out, f"rank{rank}"), list(data_type_list or [])) for run_dir, rank in runs]
    if process_num == 1:
        total = sum(_convert_rank(*job) for job in jobs)
    else:
        with ProcessPoolExecutor(max_workers=process_num) as pool:
            total = sum(pool.map(_convert_rank, *zip(*jobs)))
    logger.info(f"csv2tensorboard: {len(runs)} run(s), {total} scalars written to {out}")
    return out
