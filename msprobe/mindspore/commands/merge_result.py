"""`msprobe -f mindspore merge_result`: the same merge as for PyTorch (compare reports share one format)."""
from msprobe.pytorch.commands.merge_result import DESCRIPTION, add_arguments, run

__all__ = ["DESCRIPTION", "add_arguments", "run"]
