"""The `trend` command line, shared by `msprobe -f pytorch` and `msprobe -f mindspore`."""
import argparse
import os

from msprobe.core.errors import ConfigError
from msprobe.core.log import logger

__all__ = ["DESCRIPTION", "add_arguments", "run"]

DESCRIPTION = ("Store every (step, rank, call, statistic) of a job's dumps in OUT/trend.duckdb (incremental) "
               "and draw a step × rank × module drift heatmap (PNG and HTML).")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-i", "--input_path", required=True, action="append",
                        help="dump root (step*/rank*/dump.json) or TrainerMon csv output (its run folders "
                             "{stamp}-rank{r}-{id}); repeat -i for several")
    parser.add_argument("-o", "--output_path", default="./output", help="folder of trend.duckdb (default ./output)")
    parser.add_argument("--stat", default="norm", choices=("max", "min", "mean", "norm"),
                        help="statistic of the heatmap (default norm)")
    parser.add_argument("--threshold", type=float, default=1e-3,
                        help="relative drift that counts as drifting (default 1e-3)")


def run(args) -> int:
    from msprobe.core.paths import make_dir
    from msprobe.core.trend.heatmap import write_heatmaps
    from msprobe.core.trend.monitor_rows import is_monitor_output
    from msprobe.core.trend.store import TREND_FILE, TrendStore

    if not args.threshold >= 0:
        raise ConfigError(f"--threshold must be >= 0, got {args.threshold}.")
    output = make_dir(args.output_path, what="output_path")
    with TrendStore(os.path.join(output, TREND_FILE)) as store:
        for root in args.input_path:
            monitor = is_monitor_output(root)
            added = store.ingest_monitor_root(root) if monitor else store.ingest_dump_root(root)
            logger.info("trend: %s: %d new (step, rank) %s, %d rows", root, len(added),
                        "monitor record(s)" if monitor else "dump(s)", sum(rows for _, _, rows in added))
        result = write_heatmaps(store, output, args.stat, args.threshold)
    first = result["first_drift"]
    where = ("no drift beyond the threshold" if first is None else
             f"starts to drift at step {first['step']}, rank {first['rank']}, {first['module']} "
             f"(relative {args.stat} drift {first['drift']:.3g})")
    logger.info("trend: %s\n  store: %s\n  heatmap: %s, %s", where, os.path.join(output, TREND_FILE),
                result["png"], result["html"])
    return 0
