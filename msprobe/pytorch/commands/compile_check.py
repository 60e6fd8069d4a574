"""`msprobe -f pytorch compile_check`: the first module whose torch.compile'd numerics part from eager."""
from msprobe.core.compile_report import add_script_arguments, check_script

DESCRIPTION = ("Run the script's compile_target() model eager and compiled whole (forward and backward) and, where "
               "they depart, find the module at fault by running module sets eagerly inside the compile; then "
               "compile it module by module and name the first module whose compiled output departs while its "
               "inputs agree.")


def add_arguments(parser):
    add_script_arguments(parser)
    parser.add_argument("--backend", default="inductor", help="torch.compile backend (default: inductor)")
    parser.add_argument("--dump_graphs", "--dump-graphs", dest="dump_graphs", action="store_true",
                        help="also write the FX graphs holding the suspect module")
    parser.add_argument("--tolerance", type=float, default=None,
                        help="the whole graph's allowance, in epsilons of each tensor's dtype "
                             "(default: 64 for 32-bit, 8 for 16-bit)")
    parser.add_argument("--whole_graph_only", "--whole-graph-only", dest="whole_graph_only", action="store_true",
                        help="skip the module-by-module comparison (its dumps, repro and graphs)")


def run(args):
    from msprobe.pytorch.compile_check import CompileCheckError, compile_check

    return check_script(args, compile_check, CompileCheckError, backend=args.backend, dump_graphs=args.dump_graphs,
                        tolerance=args.tolerance, module_by_module=not args.whole_graph_only)
