"""`msprobe -f mindspore compare`: MindSpore vs MindSpore (API/Cell or L2 kernel dumps) and
MindSpore vs PyTorch (-am / -cm / -lm / -dm), with the options and report of every compare
(msprobe.core.compare.command); MindSpore adds its name mapping and kernel dumps."""
from msprobe.core.compare import command
from msprobe.core.errors import ConfigError

DESCRIPTION = ("Compare MindSpore dumps with MindSpore or PyTorch dumps (API, Cell or L2 kernel level) "
               "into compare_result_*.xlsx.")
_HELP = {"input_path": "compare.json: npu_path, bench_path [, stack_path, is_print_compare_log]; "
                       "for kernel dumps also rank_id, step_id",
         "api_mapping": "MindSpore vs PyTorch: built-in API name mapping, plus rules from an optional YAML",
         "cell_mapping": "MindSpore vs PyTorch: compare Cells with Modules, optional YAML 'path.Class: path.Class'",
         "data_mapping": "row name mapping YAML: ms_row: bench_row",
         "layer_mapping": "layer mapping YAML {Layer: {ms: pt}}"}


def add_arguments(parser):
    command.add_arguments(parser, _HELP)


def _id_list(content, key):
    value = content.get(key) or []
    if not isinstance(value, list) or any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in value):
        raise ConfigError(f"compare file: '{key}' must be a list of integers >= 0, got {value!r}.")
    return value


def _entry_mapper(args):
    from msprobe.core.compare.ms_to_pt import ms_to_pt_entry_mapper
    # a bare -am uses the built-in Mint->Torch table; a YAML adds rules on top of it (NameMapper tries
    # them first). -cm / -lm compare Cells with PyTorch Modules.
    return ms_to_pt_entry_mapper(api_defaults=args.api_mapping is not None,
                                 cells_to_modules=args.cell_mapping is not None or args.layer_mapping is not None)


def _kernel_dumps(content, args, options):
    """Native L2 kernel dumps (rank_N/...) are compared by kernel_compare; True when it did."""
    import os

    from msprobe.mindspore.compare.kernel_compare import compare_kernel_dumps, is_kernel_dump

    if not (os.path.isdir(content["npu_path"]) and is_kernel_dump(content["npu_path"])):
        return False
    if any(v is not None for v in (args.api_mapping, args.cell_mapping, args.layer_mapping, args.data_mapping)):
        raise ConfigError("kernel (L2) compare takes only -i and -o; mapping options apply to API/Cell dumps.")
    compare_kernel_dumps(content["npu_path"], content["bench_path"], args.output_path, options,
                         _id_list(content, "rank_id"), _id_list(content, "step_id"))
    return True


def run(args):
    return command.run(args, entry_mapper=_entry_mapper(args), special_input=_kernel_dumps)
