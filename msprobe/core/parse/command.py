"""`msprobe -f FRAMEWORK parse`: the interactive session, or (26.x's form, `-d PATH [-t npy|pt] [-o OUT]`) every
dumped tensor file under PATH written again as .npy or .pt into OUT, keeping the folders below PATH.

The framework's command module gives `run` a `save_pt(array, path)` (PyTorch: torch.save of the tensor); without
one `-t pt` is refused. Arrays are read as the compare reads them (core/io/tensor_io.py: no unpickling of
anything but plain tensors; float16 and bfloat16 are widened to float32).
"""
import os
from typing import Callable, List, Optional

from msprobe.core.errors import ConfigError, PathError

__all__ = ["DESCRIPTION", "add_arguments", "run", "tensor_files"]

DESCRIPTION = ("Interactive tool: show a tensor file (pt), compare two (cn), look up an API in a dump (pk), "
               "compare two directories (vc). Type 'help' inside. With -d: convert dumped tensor files (26.x's form).")
_SUFFIXES = (".pt", ".npy")


def add_arguments(parser):
    """Without options the session starts; -d converts files instead."""
    parser.add_argument("-d", "--dump_path", default=None,
                        help="a tensor file (.pt/.npy) or a folder: every tensor file under it is converted")
    parser.add_argument("-t", "--type", choices=("npy", "pt"), default="pt", help="format written (default pt)")
    parser.add_argument("-o", "--output_path", default="./output", help="output folder (default ./output)")


def tensor_files(path: str) -> List[str]:
    """The .pt/.npy files at or under `path`, sorted."""
    from msprobe.core.paths import check_path

    path = check_path(path, what="-d", allow_symlink=True)
    if os.path.isfile(path):
        return [path] if path.endswith(_SUFFIXES) else []
    return sorted(os.path.join(folder, name) for folder, _, names in os.walk(path) for name in names
                  if name.endswith(_SUFFIXES))


def run(args, save_pt: Optional[Callable[[object, str], None]] = None):
    if args.dump_path is None:
        from msprobe.core.parse.shell import run_shell

        return run_shell()
    import numpy as np

    from msprobe.core.io.tensor_io import load_tensor
    from msprobe.core.paths import ensure_dir

    if args.type == "pt" and save_pt is None:
        raise ConfigError("parse -t pt needs PyTorch: run msprobe -f pytorch parse, or write -t npy.")
    files = tensor_files(args.dump_path)
    if not files:
        raise PathError(f"-d '{args.dump_path}' holds no .pt or .npy file.")
    base = args.dump_path if os.path.isdir(args.dump_path) else os.path.dirname(os.path.abspath(args.dump_path))
    for source in files:
        target = os.path.join(args.output_path, os.path.splitext(os.path.relpath(source, base))[0] + "." + args.type)
        ensure_dir(os.path.dirname(target))
        array = load_tensor(source)
        if save_pt is None or args.type == "npy":
            np.save(target, array, allow_pickle=False)
        else:
            save_pt(array, target)
    print(f"parse: {len(files)} tensor file(s) written as .{args.type} under {os.path.abspath(args.output_path)}")
    return 0
