"""The `compare` command line, defined once for every framework: options, compare.json, dispatch.

Framework commands (`msprobe -f pytorch compare`, `msprobe -f mindspore compare`) are thin: they give
`add_arguments` a few help texts and `run` an `entry_mapper` (cross-framework names) and, optionally, a
`special_input` hook that takes over inputs only that framework understands (MindSpore kernel dumps).
Importing this module imports no framework.
"""
import argparse
import os
from typing import Callable, Optional

from msprobe.core.errors import ConfigError
from msprobe.core.paths import load_json

__all__ = ["add_arguments", "read_compare_json", "options_from_args", "run", "DESCRIPTION"]

DESCRIPTION = "Compare the dumps of a run under test (NPU) with a reference run (bench), API by API."
_MAPPING_HELP = {"api_mapping": "API mapping YAML (cross-framework)",
                 "cell_mapping": "cell/module mapping YAML (cross-framework)",
                 "data_mapping": "row name mapping YAML: npu_name: bench_name",
                 "layer_mapping": "layer mapping YAML {Layer: {npu_child: bench_child}}",
                 "input_path": "compare.json with npu_path, bench_path [, stack_path, is_print_compare_log]"}


def add_arguments(parser: argparse.ArgumentParser, help_texts: Optional[dict] = None) -> None:
    """The compare options (same flags for every framework); `help_texts` overrides the help of
    input_path, api_mapping, cell_mapping, data_mapping or layer_mapping."""
    texts = dict(_MAPPING_HELP, **(help_texts or {}))
    parser.add_argument("-i", "--input_path", default=None, help=texts["input_path"])
    # 26.x's form: the two dumps named on the command line (a dump.json or any folder holding dumps)
    parser.add_argument("-tp", "--target_path", default=None,
                        help="instead of -i: the run under test, a dump.json or a folder (dump root, step folder, "
                             "rank/rank<N>/proc<PID> folder)")
    parser.add_argument("-gp", "--golden_path", default=None, help="instead of -i: the bench run, as -tp")
    parser.add_argument("-tensor_log", "--is_print_compare_log", action="store_true",
                        help="with -tp/-gp: print each compared row (compare.json's is_print_compare_log)")
    parser.add_argument("--xlsx", action="store_true", help="accepted for 26.x command lines: reports are always xlsx")
    parser.add_argument("-o", "--output_path", default="./output", help="output directory (default ./output)")
    parser.add_argument("-s", "--stack_mode", action="store_true",
                        help="show NPU_Stack_Info when compare.json sets stack_path (auto-detected otherwise)")
    parser.add_argument("-c", "--compare_only", action="store_true",
                        help="skip the automatic analysis (no advisor_{timestamp}.txt)")
    parser.add_argument("-f", "-fm", "--fuzzy_match", action="store_true",
                        help="match APIs whose names differ only in the call counter")
    parser.add_argument("-d", "--diff_only", action="store_true",
                        help="write only rows that fail, warn, differ, are highlighted or beyond dtype tolerance")
    parser.add_argument("-am", "--api_mapping", nargs="?", const=True, default=None, help=texts["api_mapping"])
    parser.add_argument("-cm", "--cell_mapping", nargs="?", const=True, default=None, help=texts["cell_mapping"])
    parser.add_argument("-dm", "--data_mapping", default=None, help=texts["data_mapping"])
    parser.add_argument("-lm", "--layer_mapping", default=None, help=texts["layer_mapping"])
    parser.add_argument("-p", "--processes", type=int, default=None, help="worker processes (default: all cores)")
    parser.add_argument("--engine", choices=("local", "ray"), default="local",
                        help="dump roots: compare pairs in processes here (local) or as tasks on a Ray cluster")
    parser.add_argument("--address", default=None, help="--engine ray: the cluster's address (default: auto)")
    parser.add_argument("--layout", default=None,
                        help="YAML/JSON: how the NPU run is sharded over ranks (Shard(d)/Partial/Replicate per row "
                             "pattern); its ranks are recombined and compared with the bench run's ranks. 'auto': the "
                             "placements the dump recorded for DTensors (layout.json beside dump.json)")


def read_compare_json(path: str) -> dict:
    """compare.json as a dict; it must set npu_path and bench_path."""
    content = load_json(path, what="compare file (-i)")
    if not isinstance(content, dict) or not content.get("npu_path") or not content.get("bench_path"):
        raise ConfigError(f"compare file '{path}' must set 'npu_path' and 'bench_path'.")
    for key in ("npu_path", "bench_path", "stack_path"):
        if content.get(key) is not None and not isinstance(content[key], str):
            raise ConfigError(f"compare file '{path}': '{key}' must be a path (a string).")
    return content


def _inputs(args) -> dict:
    """compare.json's content, from -i or from -tp/-gp (two single dumps as their dump.json files; folders holding
    several ranks or steps as they are, paired rank by rank)."""
    given = [flag for flag, value in (("-i", args.input_path), ("-tp", args.target_path), ("-gp", args.golden_path))
             if value is not None]
    if args.input_path is not None:
        if len(given) > 1:
            raise ConfigError("give either -i compare.json or -tp/-gp, not both.")
        return read_compare_json(args.input_path)
    if len(given) < 2:
        raise ConfigError("compare needs -i compare.json, or -tp TARGET -gp GOLDEN (dump.json files or dump folders).")
    npu, bench = _dumps_in(args.target_path, "-tp"), _dumps_in(args.golden_path, "-gp")
    single = len(npu) == 1 and len(bench) == 1
    return {"npu_path": npu[0] if single else args.target_path, "bench_path": bench[0] if single else args.golden_path,
            "is_print_compare_log": args.is_print_compare_log}


def _dumps_in(path: str, flag: str) -> list:
    """The dump.json files under a -tp/-gp path; a folder without any (MindSpore kernel dumps) is left whole."""
    from msprobe.core.dump_paths import dump_jsons
    from msprobe.core.errors import PathError

    try:
        return dump_jsons(path, flag)
    except PathError:
        if os.path.isdir(path):
            return [path, path]  # not a single dump.json: compared as the folder it is
        raise


def options_from_args(args, stack_path=None, print_log=True, entry_mapper=None):
    from msprobe.core.compare import CompareOptions

    if args.processes is not None and args.processes < 1:
        raise ConfigError(f"-p must be at least 1, got {args.processes}.")
    return CompareOptions(stack_mode=args.stack_mode, stack_path=stack_path, auto_analyze=not args.compare_only,
                          fuzzy_match=args.fuzzy_match, diff_only=args.diff_only, data_mapping=args.data_mapping,
                          api_mapping=args.api_mapping, cell_mapping=args.cell_mapping,
                          layer_mapping=args.layer_mapping, processes=args.processes,
                          is_print_compare_log=print_log, entry_mapper=entry_mapper,
                          engine=getattr(args, "engine", "local"), address=getattr(args, "address", None),
                          layout=getattr(args, "layout", None))


def run(args, entry_mapper: Optional[Callable[[str], str]] = None,
        special_input: Optional[Callable[[dict, object, object], bool]] = None) -> int:
    """Read compare.json and compare. special_input(content, args, options) may handle the inputs itself
    (returning True), e.g. MindSpore kernel dumps; otherwise dump.json files or directories are compared."""
    from msprobe.core.compare import compare_dumps

    if args.data_mapping and args.fuzzy_match:
        raise ConfigError("-dm (data_mapping) cannot be combined with -f (fuzzy_match).")
    content = _inputs(args)
    options = options_from_args(args, content.get("stack_path"), bool(content.get("is_print_compare_log", True)),
                                entry_mapper)
    if special_input is not None and special_input(content, args, options):
        return 0
    compare_dumps(content["npu_path"], content["bench_path"], args.output_path, options)
    return 0
