"""`msprobe -f pytorch trend`: a job's statistics in one DuckDB file, with drift heatmaps
(msprobe.core.trend.command)."""
from msprobe.core.trend import command

DESCRIPTION = command.DESCRIPTION


def add_arguments(parser):
    command.add_arguments(parser)


def run(args):
    return command.run(args)
