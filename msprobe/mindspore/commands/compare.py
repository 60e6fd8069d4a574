"""`msprobe -f mindspore compare`: MindSpore vs MindSpore (API/Cell or L2 kernel dumps) and
MindSpore vs PyTorch (-am / -cm / -lm / -dm), with the PyTorch compare's options and report."""
from msprobe.core.errors import ConfigError
from msprobe.core.paths import load_json
from msprobe.pytorch.commands.compare import add_arguments as _common_arguments, options_from_args

DESCRIPTION = ("Compare MindSpore dumps with MindSpore or PyTorch dumps (API, Cell or L2 kernel level) "
               "into compare_result_*.xlsx.")


def add_arguments(parser):
    _common_arguments(parser)


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
    options = options_from_args(args, content.get("stack_path"), print_log, entry_mapper=_entry_mapper(args))
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
