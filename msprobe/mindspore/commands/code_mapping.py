"""`msprobe -f mindspore code_mapping`: link the kernels of a graph-mode (L2) dump to source lines via an IR file."""

DESCRIPTION = "Map the kernels of a MindSpore L2 dump (npy files or statistic.csv) to code lines and scopes of an IR."


def add_arguments(parser):
    parser.add_argument("--ir", required=True, help="IR file written by save_graphs (e.g. graph_build_0_*.ir)")
    parser.add_argument("--dump_data", required=True, help="L2 dump folder, or one .npy / statistic.csv file")
    parser.add_argument("--output", default="./", help="folder for code_mapping_{ts}.csv (npy mode; default ./)")


def run(args):
    from msprobe.mindspore.code_mapping import map_dump

    map_dump(args.ir, args.dump_data, args.output)
    return 0
