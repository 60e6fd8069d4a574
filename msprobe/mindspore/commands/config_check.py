"""`msprobe -f mindspore config_check`: what differs between the setups of two runs."""
from msprobe.core.config_check import command
from msprobe.core.config_check.command import DESCRIPTION, add_arguments

__all__ = ["DESCRIPTION", "add_arguments", "run"]


def run(args):
    return command.run(args, fmk="mindspore")
