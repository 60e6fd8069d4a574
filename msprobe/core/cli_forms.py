"""26.x command lines beside 1.2.1's: subcommand aliases, their option names, and the framework read from the dump.

`msprobe compare -tp NPU_DIR -gp BENCH_DIR -o OUT` runs what `msprobe -f <framework> compare ...` runs, the
framework taken from the `framework` field of the first dump.json the command names; `acc_check` is `run_ut`,
`graph_visualize` is `graph` and so on (ALIASES). Without `-f` and without a dump to read, the framework stays
PyTorch, as 1.2.1's command lines have it. Imports no framework.
"""
from typing import Dict, List, Optional, Sequence, Tuple

from msprobe.core.errors import ConfigError, MsprobeError

__all__ = ["ALIASES", "REFUSED", "DUMP_OPTIONS", "resolve_command", "option_value", "framework_of_args"]

#: 26.x name -> our subcommand
ALIASES: Dict[str, str] = {
    "acc_check": "run_ut",
    "multi_acc_check": "multi_run_ut",
    "overflow_check": "nan_analyze",
    "graph_visualize": "graph",
    "data2db": "trend",
}
#: 26.x option -> ours, for aliases whose options are named differently
_OPTION_NAMES: Dict[str, Dict[str, str]] = {
    "data2db": {"--data": "-i", "--db": "-o"},
}
#: 26.x subcommands with no counterpart here: what to use instead
REFUSED: Dict[str, str] = {
    "offline_dump": "offline (OM/ONNX) model dumps are not supported; dump the training script with "
                    "PrecisionDebugger (docs/dump.md)",
    "install_deps": "dependencies install with pip: pip install \"msprobe[pytorch]\" (or [mindspore], [all])",
}
#: the options of our subcommands that name a dump whose header says which framework wrote it
DUMP_OPTIONS: Dict[str, Tuple[str, ...]] = {
    "compare": ("-tp", "--target_path"),
    "graph": ("-tp", "--target_path"),
    "run_ut": ("-api_info", "--api_info_file"),
    "multi_run_ut": ("-api_info", "--api_info_file"),
    "nan_analyze": ("-i", "--input_path"),
    "trend": ("-i", "--input_path"),
}
#: options only 26.x's command lines use: they make a command line 26.x's form (framework from the dump)
_FORM_26X = ("-tp", "--target_path")


def resolve_command(name: str, args: Sequence[str]) -> Tuple[str, List[str], bool]:
    """(our subcommand, its arguments with 26.x option names translated, whether this is 26.x's form)."""
    if name in REFUSED:
        raise ConfigError(f"'{name}' (msprobe 26.x) has no counterpart here: {REFUSED[name]}.")
    renames = _OPTION_NAMES.get(name, {})
    translated = []
    for token in args:
        flag, eq, value = token.partition("=")
        translated.append(renames[flag] + eq + value if flag in renames else token)
    is_26x = name in ALIASES or any(token.partition("=")[0] in _FORM_26X for token in args)
    return ALIASES.get(name, name), translated, is_26x


def option_value(args: Sequence[str], flags: Sequence[str]) -> Optional[str]:
    """The value of the first of `flags` in an argument list (`-x VALUE` or `--xx=VALUE`); None when absent."""
    for i, token in enumerate(args):
        flag, eq, value = token.partition("=")
        if flag in flags:
            if eq:
                return value
            if i + 1 < len(args) and not args[i + 1].startswith("-"):
                return args[i + 1]
    return None


def framework_of_args(command: str, args: Sequence[str], required: bool) -> Optional[str]:
    """The framework recorded by the dump a command line names (DUMP_OPTIONS); None when it names none. A dump
    whose header does not say is an error when `required` (26.x's form), else None (1.2.1's form: PyTorch)."""
    from msprobe.core.dump_paths import dump_framework

    path = option_value(args, DUMP_OPTIONS.get(command, ()))
    if path is None:
        return None
    try:
        framework = dump_framework(path, DUMP_OPTIONS[command][0])
    except (MsprobeError, OSError):  # a path the command itself will refuse, with its own message
        return None
    if framework in ("pytorch", "mindspore"):
        return framework
    if required:
        raise ConfigError(f"the dump under '{path}' does not say which framework wrote it (no \"framework\" in "
                          f"its dump.json); give it: msprobe -f pytorch {command} ... or msprobe -f mindspore "
                          f"{command} ...")
    return None
