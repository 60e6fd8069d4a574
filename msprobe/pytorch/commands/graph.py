"""`msprobe -f pytorch graph`: model graph (.vis for tb-graph-ascend, optional HTML) from dumps."""
from msprobe.visualization.command import DESCRIPTION, add_arguments
from msprobe.visualization.command import run as _run

__all__ = ["DESCRIPTION", "add_arguments", "run"]


def run(args):
    return _run(args, framework="pytorch")
