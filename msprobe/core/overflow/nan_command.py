"""The `nan_analyze` command line, shared by `msprobe -f pytorch` and `msprobe -f mindspore`."""
import argparse

from msprobe.core.log import logger

__all__ = ["DESCRIPTION", "add_arguments", "run"]

DESCRIPTION = ("Find the rank, step and call that first produced an inf/nan in a multi-rank dump "
               "(statistics, overflow_check or flight_recorder), ordering ranks through their collectives.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-i", "--input_path", required=True,
                        help="dump root (step*/rank*/dump.json), a step folder or a rank folder")
    parser.add_argument("-o", "--output_path", default="./output",
                        help="folder for nan_analyze_{timestamp}.json (default ./output)")
    parser.add_argument("--ignore", action="append", default=None, metavar="RULE",
                        help="expected infs, as in ignore_non_finite: 'NAME', 'NAME:-inf' or ':-inf' (repeatable)")


def run(args) -> int:
    from msprobe.core.overflow.nan_analyze import analyze_job, report_text, write_report

    report = analyze_job(args.input_path, args.ignore)
    path = write_report(report, args.output_path)
    logger.info("%s\nreport: %s", report_text(report), path)
    return 0
