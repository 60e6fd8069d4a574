"""`msprobe -f pytorch multi_run_ut`: run_ut split over N worker processes, same CSVs as run_ut."""
from msprobe.core.run_ut.command import add_run_ut_arguments, execute_run_ut
from msprobe.core.run_ut.report import PYTORCH_LAYOUT
from msprobe.pytorch.commands.run_ut import FACTORY

DESCRIPTION = "run_ut over several worker processes (-n) and devices (-d); results identical to run_ut."


def add_arguments(parser):
    add_run_ut_arguments(parser, multi=True, pytorch=True)


def start_method():
    """'fork' (workers import torch themselves, in parallel; the parent only reads and writes files), or 'spawn'
    once this process has used CUDA: a forked child cannot initialise it again, so every API would be skipped
    ("Cannot re-initialize CUDA in forked subprocess", seen on a GPU machine when run_ut ran in-process first)."""
    import sys
    torch = sys.modules.get("torch")  # not imported: CUDA cannot have been used
    return "spawn" if torch is not None and torch.cuda.is_initialized() else "fork"


def run(args):
    return execute_run_ut(args, FACTORY, PYTORCH_LAYOUT, {}, multi=True, start_method=start_method())
