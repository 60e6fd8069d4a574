"""Options and flow shared by the run_ut / multi_run_ut subcommands of both frameworks."""
import os
import time

from msprobe.core.dump_paths import dump_json_of
from msprobe.core.errors import ConfigError
from msprobe.core.log import logger
from msprobe.core.run_ut.api_info import drop_repeated_cases, filter_by_lists, load_api_cases
from msprobe.core.run_ut.report import ResultWriter
from msprobe.core.run_ut.runner import WorkerPool, run_cases

__all__ = ["add_run_ut_arguments", "run_ut_lists", "execute_run_ut", "MAX_WORKERS"]

MAX_WORKERS = 64


def add_run_ut_arguments(parser, multi=False, pytorch=True):
    """The options of docs 07 §3.1/3.2 (PyTorch) and 09 §3 (MindSpore)."""
    parser.add_argument("-api_info", "--api_info_file", dest="api_info_file", required=True,
                        help="dump.json of an L1 (or mix) dump")
    parser.add_argument("-o", "--out_path", dest="out_path", default="./", help="output directory (default ./)")
    parser.add_argument("-save_error_data", dest="save_error_data", action="store_true",
                        help="save inputs/outputs of APIs that fail")
    parser.add_argument("-csv_path", "--result_csv_path", dest="result_csv_path", default="",
                        help="accuracy_checking_result_{ts}.csv of an interrupted run, to resume it")
    parser.add_argument("-d", "--device", dest="device_id", type=int, nargs="+" if multi else None,
                        default=[0] if multi else 0, help="device id(s) (CUDA if present; else the CPU)")
    if pytorch:
        parser.add_argument("-j", "--jit_compile", dest="jit_compile", action="store_true",
                            help="accepted for compatibility; has no effect on CPU/CUDA")
        parser.add_argument("-f", "--filter_api", dest="filter_api", action="store_true",
                            help="check only the first of APIs that differ in statistics only")
        parser.add_argument("-config", "--config_path", dest="config_path", default="",
                            help="config.json whose run_ut section gives white_list/black_list/error_data_path")
    if multi:
        parser.add_argument("-n", "--num_splits", dest="num_splits", type=int, default=None,
                            help="number of worker processes, 1 to 64 (default: one per CPU core, at most 8 "
                                 "per -d device for PyTorch, one per device for MindSpore)")


def run_ut_lists(config_path):
    """(white_list, black_list, error_data_path) from the run_ut section of config.json."""
    if not config_path:
        return [], [], "./"
    from msprobe.core.config import load_task_section

    section = load_task_section(config_path, "run_ut")
    return section.get("white_list") or [], section.get("black_list") or [], section.get("error_data_path") or "./"


def _worker_count(args, multi, per_device):
    """-n, else one worker per CPU core, at most `per_device` per -d device and MAX_WORKERS."""
    if not multi:
        return 1
    devices = args.device_id or [0]
    splits = getattr(args, "num_splits", None)
    default = min(per_device * len(devices), os.cpu_count() or 1, MAX_WORKERS)
    count = splits if splits is not None else max(1, default)
    if not 1 <= count <= MAX_WORKERS:
        raise ConfigError(f"-n must be between 1 and {MAX_WORKERS}, got {count}.")
    return count


def execute_run_ut(args, factory, layout, settings, multi=False, error_dir_name=None, start_method="fork",
                   workers_per_device=8):
    """Load cases, filter them, and run them into the CSVs; `settings` go to the executor factory
    (named by its 'module:function' path, imported only where it runs), plus 'device_id',
    'tensor_dir', 'error_data_dir' and 'threads'. Failing APIs' data go to <out>/ut_error_data{ts}
    (or <out>/<error_dir_name>) with -save_error_data. `start_method` starts multi_run_ut workers;
    without -n there are up to `workers_per_device` per device, never more than the CPU cores."""
    api_info = dump_json_of(args.api_info_file, what="-api_info")  # a dump.json or a folder holding one
    devices = args.device_id if isinstance(args.device_id, list) else [args.device_id]
    workers = _worker_count(args, multi, workers_per_device)
    # workers start first: their framework import overlaps the reading of dump.json below
    pool = WorkerPool(factory, workers, start_method, devices) if workers > 1 else None
    try:
        info = load_api_cases(api_info)
        white, black, error_root = run_ut_lists(getattr(args, "config_path", ""))
        cases = drop_repeated_cases(info.cases) if getattr(args, "filter_api", False) else info.cases
        kept, blocked = filter_by_lists(cases, white, black)
        skipped = [(case, "filtered out by white_list/black_list") for case in blocked]
        if args.save_error_data:
            root = error_root if getattr(args, "config_path", "") else args.out_path
            name = error_dir_name or f"ut_error_data{time.strftime('%Y%m%d%H%M%S')}"
            settings["error_data_dir"] = os.path.join(os.path.abspath(root), name)
        settings["tensor_dir"] = info.tensor_dir
        # one thread per process: reductions then split the same way in run_ut and in every multi_run_ut
        # worker, so both give identical numbers (and threads do not fight over shared cores)
        settings["threads"] = 1
        writer = ResultWriter(args.out_path, layout, resume_csv=args.result_csv_path or None)
        logger.info("run_ut: %d APIs (%s data) from %s, %d worker(s)", len(kept) + len(skipped),
                    "real" if info.real_data else "random", api_info, workers)
        run_cases(kept, writer, factory, settings, skipped=skipped, pool=pool, device_id=devices[0])
    finally:
        if pool is not None:
            pool.close()
    return 0
