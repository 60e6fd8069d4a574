"""`msprobe -f pytorch nan_analyze`: the rank, step and call where a job's first inf/nan was produced
(msprobe.core.overflow.nan_command)."""
from msprobe.core.overflow import nan_command

DESCRIPTION = nan_command.DESCRIPTION


def add_arguments(parser):
    nan_command.add_arguments(parser)


def run(args):
    return nan_command.run(args)
