"""`msprobe -f pytorch ckpt_compare`: two checkpoints compared parameter by parameter."""
from msprobe.core.ckpt_compare import command

DESCRIPTION = command.DESCRIPTION


def add_arguments(parser):
    command.add_arguments(parser, "a torch.save file (.pt/.pth/.bin, read with weights_only), a .safetensors file")


def run(args):
    from msprobe.pytorch.ckpt_reader import open_torch_checkpoint

    return command.run(args, (open_torch_checkpoint,))
