"""`msprobe -f pytorch bisect`: the smallest set of modules that must stay in float32 to get the metric back."""
DESCRIPTION = ("Find a smallest set of modules whose upcast to float32 brings the metric of the script's "
               "bisect_target() within tolerance of the all-float32 run.")


def add_arguments(parser):
    parser.add_argument("--script", required=True, help="Python file defining bisect_target() -> (model, evaluate)")
    parser.add_argument("--tolerance", type=float, default=None,
                        help="allowed |metric - all-float32 metric| (default: 1%% of the all-float32 metric)")
    parser.add_argument("-o", "--output_path", "--output-path", dest="output_path", required=True,
                        help="folder for bisect_result.json")


def run(args):
    from msprobe.core.bisect.run import summary_lines
    from msprobe.pytorch.bisect import run_bisect

    result = run_bisect(args.script, args.output_path, args.tolerance)
    print("\n".join(summary_lines(result)))
    return 0
