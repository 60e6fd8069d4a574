"""`msprobe -f {pytorch,mindspore} grad_compare`: direction similarity of two grad_probe dumps and their first divergent step."""

DESCRIPTION = "Compare two grad_probe dumps (per-step gradient direction similarity, first divergent step)."


def add_arguments(parser):
    parser.add_argument("-i", "--input_path1", "--dump_path1", dest="dump_path1", required=True,
                        help="dump_path of the first grad_probe run (with rank{N}/ folders), or one rank folder")
    parser.add_argument("-b", "--input_path2", "--dump_path2", dest="dump_path2", required=True,
                        help="dump_path of the second run, same layout")
    parser.add_argument("-o", "--output_path", required=True, help="directory for rank{N}/similarities.csv and pictures")


def run(args):
    import os
    import re

    from msprobe.core.monitor.grad_compare import GradComparator

    one_rank = re.compile(r"^grad_summary_\d+\.csv$")
    if os.path.isdir(args.dump_path1) and any(one_rank.match(n) for n in os.listdir(args.dump_path1)):
        GradComparator.compare(args.dump_path1, args.dump_path2, args.output_path)
    else:
        GradComparator.compare_distributed(args.dump_path1, args.dump_path2, args.output_path)
    return 0
