"""`msprobe -f pytorch multi_run_ut`: run_ut split over N worker processes, same CSVs as run_ut."""
from msprobe.core.run_ut.command import add_run_ut_arguments, execute_run_ut
from msprobe.core.run_ut.report import PYTORCH_LAYOUT
from msprobe.pytorch.commands.run_ut import FACTORY

DESCRIPTION = "run_ut over several worker processes (-n) and devices (-d); results identical to run_ut."


def add_arguments(parser):
    add_run_ut_arguments(parser, multi=True, pytorch=True)


def run(args):
    # forked workers import torch themselves, in parallel; the parent only reads and writes files
    return execute_run_ut(args, FACTORY, PYTORCH_LAYOUT, {}, multi=True, start_method="fork")
