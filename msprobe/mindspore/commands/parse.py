"""`msprobe -f mindspore parse`: the interactive session that shows, compares and looks up dumped tensors, or
(-d ... -t npy) dumped tensor files converted to .npy (msprobe/core/parse/command.py)."""
from msprobe.core.parse.command import DESCRIPTION, add_arguments, run

__all__ = ["DESCRIPTION", "add_arguments", "run"]
