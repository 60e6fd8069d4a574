"""`msprobe -f pytorch compare`: compare NPU and bench dumps into compare_result_{timestamp}.xlsx."""
from msprobe.core.errors import ConfigError
from msprobe.core.paths import load_json

DESCRIPTION = "Compare the dumps of a run under test (NPU) with a reference run (bench), API by API."


def add_arguments(parser):
    """The compare options; MindSpore's command reuses this function."""
    parser.add_argument("-i", "--input_path", required=True,
                        help="compare.json with npu_path, bench_path [, stack_path, is_print_compare_log]")
    parser.add_argument("-o", "--output_path", default="./output", help="output directory (default ./output)")
    parser.add_argument("-s", "--stack_mode", action="store_true",
                        help="show NPU_Stack_Info when compare.json sets stack_path (auto-detected otherwise)")
    parser.add_argument("-c", "--compare_only", action="store_true",
                        help="skip the automatic analysis (no advisor_{timestamp}.txt)")
    parser.add_argument("-f", "--fuzzy_match", action="store_true",
                        help="match APIs whose names differ only in the call counter")
    parser.add_argument("-d", "--diff_only", action="store_true",
                        help="write only rows that fail, warn, differ or are highlighted")
    parser.add_argument("-am", "--api_mapping", nargs="?", const=True, default=None,
                        help="API mapping YAML (cross-framework)")
    parser.add_argument("-cm", "--cell_mapping", nargs="?", const=True, default=None,
                        help="cell/module mapping YAML (cross-framework)")
    parser.add_argument("-dm", "--data_mapping", default=None, help="row name mapping YAML: npu_name: bench_name")
    parser.add_argument("-lm", "--layer_mapping", default=None, help="layer mapping YAML")
    parser.add_argument("-p", "--processes", type=int, default=None, help="worker processes (default: all cores)")


def read_compare_json(path):
    """(npu_path, bench_path, stack_path, is_print_compare_log) from compare.json."""
    content = load_json(path, what="compare file (-i)")
    if not isinstance(content, dict) or not content.get("npu_path") or not content.get("bench_path"):
        raise ConfigError(f"compare file '{path}' must set 'npu_path' and 'bench_path'.")
    return content["npu_path"], content["bench_path"], content.get("stack_path"), \
        bool(content.get("is_print_compare_log", True))


def options_from_args(args, stack_path, print_log, entry_mapper=None):
    from msprobe.core.compare import CompareOptions

    return CompareOptions(stack_mode=args.stack_mode, stack_path=stack_path, auto_analyze=not args.compare_only,
                          fuzzy_match=args.fuzzy_match, diff_only=args.diff_only, data_mapping=args.data_mapping,
                          api_mapping=args.api_mapping, cell_mapping=args.cell_mapping,
                          layer_mapping=args.layer_mapping, processes=args.processes,
                          is_print_compare_log=print_log, entry_mapper=entry_mapper)


def run(args):
    from msprobe.core.compare import compare_dumps

    if args.data_mapping and args.fuzzy_match:
        raise ConfigError("-dm (data_mapping) cannot be combined with -f (fuzzy_match).")
    npu_path, bench_path, stack_path, print_log = read_compare_json(args.input_path)
    compare_dumps(npu_path, bench_path, args.output_path, options_from_args(args, stack_path, print_log))
    return 0
