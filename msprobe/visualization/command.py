"""Arguments and run function shared by `msprobe -f pytorch graph` and `msprobe -f mindspore graph`
(and the `view` option that turns a `.vis` into HTML)."""

__all__ = ["DESCRIPTION", "add_arguments", "run"]

DESCRIPTION = ("Build the model graph of a dump (build_*.vis) or compare two dumps node by node (compare_*.vis) "
               "for tb-graph-ascend, optionally as a self-contained HTML viewer.")


def add_arguments(parser):
    parser.add_argument("-i", "--input_path", required=True,
                        help="JSON file: {\"npu_path\": DIR, \"bench_path\": DIR (compare mode), "
                             "\"is_print_compare_log\": true}")
    parser.add_argument("-o", "--output_path", required=True, help="output directory (created if missing)")
    parser.add_argument("-lm", "--layer_mapping", default=None,
                        help="layer mapping YAML {LayerClass | TopLayer: {npu_child: bench_child}} (compare mode)")
    parser.add_argument("-oc", "--overflow_check", action="store_true", help="mark an overflow level on each node")
    parser.add_argument("-f", "--fuzzy_match", action="store_true",
                        help="match APIs inside matched modules ignoring their call counters")
    parser.add_argument("-cs", "--complete_stack", action="store_true",
                        help="keep complete call stacks (default: one line per node)")
    parser.add_argument("--html", action="store_true",
                        help="also write a self-contained HTML viewer next to each .vis")


def run(args, framework="pytorch"):
    from msprobe.visualization.service import GraphOptions, run_graph

    run_graph(args.input_path, args.output_path, GraphOptions(
        layer_mapping=args.layer_mapping, overflow_check=args.overflow_check, fuzzy_match=args.fuzzy_match,
        complete_stack=args.complete_stack, html=args.html, framework=framework))
    return 0
