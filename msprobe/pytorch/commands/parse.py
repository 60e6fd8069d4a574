"""`msprobe -f pytorch parse`: the interactive session that shows, compares and looks up dumped tensors, or
(-d) dumped tensor files converted to .npy/.pt (msprobe/core/parse/command.py)."""
from msprobe.core.parse import command
from msprobe.core.parse.command import DESCRIPTION, add_arguments

__all__ = ["DESCRIPTION", "add_arguments", "run"]


def _save_pt(array, path):
    import numpy as np
    import torch

    torch.save(torch.from_numpy(np.array(array)), path)  # a copy: the array read may be a read-only memory map


def run(args):
    return command.run(args, save_pt=_save_pt)
