"""`msprobe -f mindspore compare`: MindSpore vs MindSpore (API/Cell or L2 kernel dumps) and
MindSpore vs PyTorch (-am / -cm / -lm / -dm), with the PyTorch compare's options and report."""
from msprobe.core.errors import ConfigError
from msprobe.core.paths import load_json

DESCRIPTION = ("Compare MindSpore dumps with MindSpore or PyTorch dumps (API, Cell or L2 kernel level) "
               "into compare_result_*.xlsx.")


def add_arguments(parser):
    """The PyTorch compare's options (same flags). Defined here, not imported from msprobe.pytorch:
    that package imports torch, which a MindSpore-only installation does not have."""
    parser.add_argument("-i", "--input_path", required=True,
                        help="compare.json: npu_path, bench_path [, stack_path, is_print_compare_log]; "
                             "for kernel dumps also rank_id, step_id")
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
                        help="MindSpore vs PyTorch: built-in API name mapping, plus rules from an optional YAML")
    parser.add_argument("-cm", "--cell_mapping", nargs="?", const=True, default=None,
                        help="MindSpore vs PyTorch: compare Cells with Modules, optional YAML 'path.Class: path.Class'")
    parser.add_argument("-dm", "--data_mapping", default=None, help="row name mapping YAML: ms_row: bench_row")
    parser.add_argument("-lm", "--layer_mapping", default=None, help="layer mapping YAML {Layer: {ms: pt}}")
    parser.add_argument("-p", "--processes", type=int, default=None, help="worker processes (default: all cores)")


def _options(args, stack_path, print_log, entry_mapper):
    from msprobe.core.compare import CompareOptions
    return CompareOptions(stack_mode=args.stack_mode, stack_path=stack_path, auto_analyze=not args.compare_only,
                          fuzzy_match=args.fuzzy_match, diff_only=args.diff_only, data_mapping=args.data_mapping,
                          api_mapping=args.api_mapping, cell_mapping=args.cell_mapping,
                          layer_mapping=args.layer_mapping, processes=args.processes,
                          is_print_compare_log=print_log, entry_mapper=entry_mapper)


def _read_compare_json(path):
    content = load_json(path, what="compare file (-i)")
    if not isinstance(content, dict) or not content.get("npu_path") or not content.get("bench_path"):
        raise ConfigError(f"compare file '{path}' must set 'npu_path' and 'bench_path'.")
    return content


def _id_list(content, key):
    value = content.get(key) or []
    if not isinstance(value, list) or any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in value):
        raise ConfigError(f"compare file: '{key}' must be a list of integers >= 0, got {value!r}.")
    return value


def _entry_mapper(args):
    from msprobe.mindspore.compare.ms_to_pt import ms_to_pt_entry_mapper
    # a bare -am uses the built-in Mint->Torch table; a YAML adds rules on top of it (NameMapper tries
    # them first). -cm / -lm compare Cells with PyTorch Modules.
    return ms_to_pt_entry_mapper(api_defaults=args.api_mapping is not None,
                                 cells_to_modules=args.cell_mapping is not None or args.layer_mapping is not None)


def run(args):
    import os

    content = _read_compare_json(args.input_path)
    if args.data_mapping and args.fuzzy_match:
        raise ConfigError("-dm (data_mapping) cannot be combined with -f (fuzzy_match).")
    npu_path, bench_path = content["npu_path"], content["bench_path"]
    print_log = bool(content.get("is_print_compare_log", True))
    options = _options(args, content.get("stack_path"), print_log, _entry_mapper(args))
    from msprobe.mindspore.compare.kernel_compare import compare_kernel_dumps, is_kernel_dump
    if os.path.isdir(npu_path) and is_kernel_dump(npu_path):
        if any(v is not None for v in (args.api_mapping, args.cell_mapping, args.layer_mapping, args.data_mapping)):
            raise ConfigError("kernel (L2) compare takes only -i and -o; mapping options apply to API/Cell dumps.")
        compare_kernel_dumps(npu_path, bench_path, args.output_path, options,
                             _id_list(content, "rank_id"), _id_list(content, "step_id"))
        return 0
    from msprobe.core.compare import compare_dumps
    compare_dumps(npu_path, bench_path, args.output_path, options)
    return 0
