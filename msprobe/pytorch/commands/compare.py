"""`msprobe -f pytorch compare`: compare NPU and bench dumps into compare_result_{timestamp}.xlsx.

The options and compare.json handling are shared with MindSpore (msprobe.core.compare.command)."""
from msprobe.core.compare import command

DESCRIPTION = command.DESCRIPTION


def add_arguments(parser):
    command.add_arguments(parser)


def run(args):
    return command.run(args)
