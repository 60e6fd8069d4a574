"""`msprobe -f mindspore ckpt_compare`: two checkpoints compared parameter by parameter."""
from msprobe.core.ckpt_compare import command

DESCRIPTION = command.DESCRIPTION


def add_arguments(parser):
    command.add_arguments(parser, "a MindSpore .ckpt file, a .safetensors file")


def run(args):
    from msprobe.mindspore.ckpt_reader import open_mindspore_checkpoint

    return command.run(args, (open_mindspore_checkpoint,))
