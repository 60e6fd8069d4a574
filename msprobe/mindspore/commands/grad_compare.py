"""`msprobe -f mindspore grad_compare`: the same comparison as for PyTorch (the dump format is shared)."""
from msprobe.pytorch.commands.grad_compare import DESCRIPTION, add_arguments, run

__all__ = ["DESCRIPTION", "add_arguments", "run"]
