"""Arguments and run function shared by `msprobe -f pytorch graph` and `msprobe -f mindspore graph`
(and the `view` option that turns a `.vis` into HTML)."""
import os

from msprobe.core.errors import ConfigError

__all__ = ["DESCRIPTION", "add_arguments", "run"]

DESCRIPTION = ("Build the model graph of a dump (build_*.vis) or compare two dumps node by node (compare_*.vis) "
               "for tb-graph-ascend, optionally as a self-contained HTML viewer.")


def add_arguments(parser):
    parser.add_argument("-i", "--input_path", default=None,
                        help="JSON file: {\"npu_path\": DIR, \"bench_path\": DIR (compare mode), "
                             "\"is_print_compare_log\": true}")
    # 26.x's form (graph_visualize): the dumps on the command line
    parser.add_argument("-tp", "--target_path", default=None,
                        help="instead of -i: the dump to draw, a dump.json or a folder (dump root, step, rank folder)")
    parser.add_argument("-gp", "--golden_path", default=None, help="with -tp: the bench dump to compare with")
    parser.add_argument("-tensor_log", "--is_print_compare_log", action="store_true",
                        help="with -tp/-gp: print each compared node")
    parser.add_argument("-o", "--output_path", required=True, help="output directory (created if missing)")
    parser.add_argument("-lm", "--layer_mapping", default=None,
                        help="layer mapping YAML {LayerClass | TopLayer: {npu_child: bench_child}} (compare mode)")
    parser.add_argument("-oc", "--overflow_check", action="store_true", help="mark an overflow level on each node")
    parser.add_argument("-f", "-fm", "--fuzzy_match", action="store_true",
                        help="match APIs inside matched modules ignoring their call counters")
    parser.add_argument("-cs", "--complete_stack", action="store_true",
                        help="keep complete call stacks (default: one line per node)")
    parser.add_argument("--html", action="store_true",
                        help="also write a self-contained HTML viewer next to each .vis")


def run(args, framework="pytorch"):
    from msprobe.visualization.service import GraphOptions, run_graph

    run_graph(_inputs(args), args.output_path, GraphOptions(
        layer_mapping=args.layer_mapping, overflow_check=args.overflow_check, fuzzy_match=args.fuzzy_match,
        complete_stack=args.complete_stack, html=args.html, framework=framework))
    return 0


def _inputs(args):
    """-i's file, or the same content from -tp/-gp: a folder holding one dump is its rank folder."""
    from msprobe.core.dump_paths import dump_jsons

    if (args.input_path is None) == (args.target_path is None):
        raise ConfigError("graph needs either -i graph.json or -tp DUMP [-gp BENCH_DUMP].")
    if args.input_path is not None:
        return args.input_path
    content = {"is_print_compare_log": args.is_print_compare_log}
    for key, path, flag in (("npu_path", args.target_path, "-tp"), ("bench_path", args.golden_path, "-gp")):
        if path is not None:
            found = dump_jsons(path, flag)
            content[key] = os.path.dirname(found[0]) if len(found) == 1 else path
    return content
