"""`msprobe -f {pytorch,mindspore} <subcommand> ...`: parse, then import only the chosen subcommand.

A subcommand lives in `msprobe/<framework>/commands/<name>.py` and provides
`DESCRIPTION` (one line), `add_arguments(parser)` and `run(args)` (returns an exit code or None).
Importing this module imports neither torch nor mindspore, so `compare` starts fast.
"""
import argparse
import importlib
import sys

from msprobe import __version__
from msprobe.core.errors import MsprobeError
from msprobe.core.log import level_from_env, logger

__all__ = ["main", "SUBCOMMANDS", "FRAMEWORKS"]

FRAMEWORKS = ("pytorch", "mindspore")
SUBCOMMANDS = ("compare", "run_ut", "multi_run_ut", "api_precision_compare", "run_overflow_check", "parse",
               "graph", "op_generate", "merge_result", "code_mapping")


def _load_command(framework, name):
    """The command module, or None when it is not built for this framework yet."""
    module_name = f"msprobe.{framework}.commands.{name}"
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name in (module_name, f"msprobe.{framework}.commands"):
            return None
        raise


def _build_parser():
    parser = argparse.ArgumentParser(
        prog="msprobe", description="msprobe: find where a training run loses numerical accuracy.",
        epilog="Run 'msprobe -f pytorch <subcommand> -h' for the options of a subcommand.")
    parser.add_argument("-v", "--version", action="version", version=f"msprobe {__version__}")
    parser.add_argument("-f", "--framework", choices=FRAMEWORKS, default="pytorch",
                        help="framework of the data (default: pytorch)")
    parser.add_argument("subcommand", nargs="?", choices=SUBCOMMANDS, metavar="subcommand",
                        help="one of: " + ", ".join(SUBCOMMANDS))
    parser.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    return parser


def main(argv=None):
    """Entry point of the `msprobe` console script; returns the process exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = _build_parser()
    # `-h` after the subcommand belongs to the subcommand
    top_args, sub_args = argv, []
    for i, token in enumerate(argv):
        if token in SUBCOMMANDS:
            top_args, sub_args = argv[:i + 1], argv[i + 1:]
            break
    args = parser.parse_args(top_args)
    if args.subcommand is None:
        parser.print_help()
        return 2
    try:
        module = _load_command(args.framework, args.subcommand)
        if module is None:
            raise MsprobeError(f"'{args.subcommand}' is not implemented yet for {args.framework}.")
        sub = argparse.ArgumentParser(prog=f"msprobe -f {args.framework} {args.subcommand}",
                                      description=getattr(module, "DESCRIPTION", None))
        module.add_arguments(sub)
        code = module.run(sub.parse_args(sub_args))
        return int(code or 0)
    except MsprobeError as exc:
        if level_from_env() == 0:
            logger.exception("%s", exc)
        else:
            logger.error("%s", exc)
        return 1
    except KeyboardInterrupt:
        logger.error("interrupted.")
        return 130


def console_main():
    sys.exit(main())


if __name__ == "__main__":
    console_main()
