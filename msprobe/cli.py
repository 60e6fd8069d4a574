"""`msprobe -f {pytorch,mindspore} <subcommand> ...`: parse, then import only the chosen subcommand.

26.x's form works too: `msprobe compare -tp NPU_DIR -gp BENCH_DIR -o OUT`, the framework read from the dump,
and 26.x's subcommand names (`acc_check` for run_ut ...) as aliases (msprobe/core/cli_forms.py).

A subcommand is a file `msprobe/<framework>/commands/<name>.py` providing `DESCRIPTION` (one line),
`add_arguments(parser)` and `run(args)` (returns an exit code or None); one that is the same for every
framework lives once in `msprobe/core/commands/`. The commands are found by listing those folders,
so `msprobe -h` shows exactly what this installation can run. Importing this
module imports neither torch nor mindspore, so `compare` starts fast.

Every failure is one line: `[ERROR] message`, exit 1. The traceback appears with MSPROBE_LOG_LEVEL=0.
"""
import argparse
import importlib
import os
import sys

from msprobe import __version__
from msprobe.core import cli_forms
from msprobe.core.errors import MsprobeError
from msprobe.core.log import level_from_env, logger

__all__ = ["main", "SUBCOMMANDS", "FRAMEWORKS", "available_commands"]

FRAMEWORKS = ("pytorch", "mindspore")
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def _command_files(package):
    """Names of the command files in msprobe/<package>/commands (without importing anything)."""
    try:
        names = os.listdir(os.path.join(_PACKAGE_DIR, package, "commands"))
    except OSError:
        return set()
    return {name[:-3] for name in names if name.endswith(".py") and not name.startswith("_") and name[:-3].isidentifier()}


def available_commands(framework):
    """Sorted names of the commands of `framework`: its own and the framework-free ones of core."""
    return tuple(sorted(_command_files(framework) | _command_files("core")))


COMMANDS = {framework: available_commands(framework) for framework in FRAMEWORKS}
SUBCOMMANDS = tuple(sorted(set().union(*COMMANDS.values())))
#: what the command line accepts: our subcommands, 26.x's names for them, and 26.x's we refuse by name
_ACCEPTED = tuple(sorted(set(SUBCOMMANDS) | set(cli_forms.ALIASES) | set(cli_forms.REFUSED)))


def _load_command(framework, name):
    """The command module of `framework`, or None when this installation has none of that name."""
    if name not in available_commands(framework):
        return None
    package = framework if name in _command_files(framework) else "core"
    return importlib.import_module(f"msprobe.{package}.commands.{name}")


def _commands_help():
    return "\n".join(f"  {framework:<10} {', '.join(COMMANDS[framework]) or '(none)'}" for framework in FRAMEWORKS)


def _build_parser():
    parser = argparse.ArgumentParser(
        prog="msprobe", description="msprobe: find where a training run loses numerical accuracy.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="subcommands of this installation, by framework:\n" + _commands_help()
               + "\n\n26.x's names: " + ", ".join(f"{a} = {c}" for a, c in sorted(cli_forms.ALIASES.items()))
               + ". Without -f the framework is read from the dump the command names (compare -tp, run_ut "
               "-api_info ...), else pytorch."
               + "\n\nRun 'msprobe -f pytorch <subcommand> -h' for the options of a subcommand.")
    parser.add_argument("-v", "--version", action="version", version=f"msprobe {__version__}")
    parser.add_argument("-f", "--framework", choices=FRAMEWORKS, default=None,
                        help="framework of the data (default: the one the dump records, else pytorch)")
    parser.add_argument("subcommand", nargs="?", choices=_ACCEPTED, metavar="subcommand",
                        help="one of: " + ", ".join(SUBCOMMANDS))
    parser.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    return parser


def _one_line(text):
    return " ".join(str(text).split()) or "failed without a message"


def _report(message):
    """Print the error line; the traceback only at MSPROBE_LOG_LEVEL=0."""
    if level_from_env() == 0:
        logger.exception("%s", message)
    else:
        logger.error("%s", message)


def main(argv=None):
    """Entry point of the `msprobe` console script; returns the process exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = _build_parser()
    # `-h` after the subcommand belongs to the subcommand
    top_args, sub_args = argv, []
    for i, token in enumerate(argv):
        if token in _ACCEPTED:
            top_args, sub_args = argv[:i + 1], argv[i + 1:]
            break
    args = parser.parse_args(top_args)
    if args.subcommand is None:
        parser.print_help()
        return 2
    try:
        name, sub_args, form_26x = cli_forms.resolve_command(args.subcommand, sub_args)
        framework = args.framework or cli_forms.framework_of_args(name, sub_args, required=form_26x) or "pytorch"
        module = _load_command(framework, name)
        if module is None:
            raise MsprobeError(f"'{name}' is not available for {framework} in msprobe {__version__}; "
                               f"{framework} commands: {', '.join(COMMANDS[framework])}.")
        sub = argparse.ArgumentParser(prog=f"msprobe -f {framework} {name}",
                                      description=getattr(module, "DESCRIPTION", None))
        module.add_arguments(sub)
        code = module.run(sub.parse_args(sub_args))
        return int(code or 0)
    except MsprobeError as exc:
        _report(_one_line(exc))
        return 1
    except KeyboardInterrupt:
        logger.error("interrupted.")
        return 130
    except OSError as exc:  # the system refused a read or write: the user can act on the path
        where = f" '{exc.filename}'" if getattr(exc, "filename", None) else ""
        _report(_one_line(f"{exc.strerror or exc}{where}."))
        return 1
    except Exception as exc:  # a bug (RecursionError, MemoryError included): still one line, marked as unexpected
        _report(_one_line(f"unexpected {type(exc).__name__}: {exc} (run with MSPROBE_LOG_LEVEL=0 for the "
                          "traceback, and please report it)."))
        return 1


def console_main():
    sys.exit(main())


if __name__ == "__main__":
    console_main()
