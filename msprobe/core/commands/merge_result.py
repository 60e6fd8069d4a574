"""`msprobe -f {pytorch,mindspore} merge_result`: merge chosen APIs' metrics of multi-rank compare results."""

DESCRIPTION = "Merge per-rank compare results of chosen APIs (e.g. communication ops) into one workbook."


def add_arguments(parser):
    parser.add_argument("-i", "--input_dir", required=True, help="directory with compare_result_rank*-rank*_*.xlsx")
    parser.add_argument("-o", "--output_dir", required=True, help="directory for multi_ranks_compare_merge_*.xlsx")
    parser.add_argument("-config", "--config-path", dest="config_path", required=True,
                        help="YAML with 'api' (names to merge) and optional 'compare_index' (metrics)")


def run(args):
    from msprobe.core.compare.merge_result import merge_results

    merge_results(args.input_dir, args.output_dir, args.config_path)
    return 0
