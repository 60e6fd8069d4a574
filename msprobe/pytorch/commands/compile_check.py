"""`msprobe -f pytorch compile_check`: the first module whose torch.compile'd numerics part from eager."""
DESCRIPTION = ("Run the script's compile_target() model eager and compiled (forward and backward), module by "
               "module, and name the first module whose compiled output departs while its inputs agree.")


def add_arguments(parser):
    parser.add_argument("--script", required=True,
                        help="Python file defining compile_target() -> (model, example_inputs)")
    parser.add_argument("--backend", default="inductor", help="torch.compile backend (default: inductor)")
    parser.add_argument("--dump_graphs", "--dump-graphs", dest="dump_graphs", action="store_true",
                        help="also write the FX graphs holding the suspect module")
    parser.add_argument("--forward_only", "--forward-only", dest="forward_only", action="store_true",
                        help="no backward pass")
    parser.add_argument("-o", "--output_path", "--output-path", dest="output_path", required=True,
                        help="folder for the dumps, the xlsx report and compile_check_result.json")


def run(args):
    from msprobe.core.user_script import call_user_function, load_script_function
    from msprobe.pytorch.compile_check import CompileCheckError, compile_check

    script = args.script
    target = load_script_function(script, "compile_target", "(model, example_inputs)", CompileCheckError)
    result = call_user_function(target, "compile_target()", CompileCheckError)
    if not (isinstance(result, tuple) and len(result) == 2 and callable(result[0])):
        raise CompileCheckError(f"compile_target() of {script} must return (model, example_inputs).")
    model, example_inputs = result
    report = compile_check(model, example_inputs, backend=args.backend, output_path=args.output_path,
                           dump_graphs=args.dump_graphs, backward=not args.forward_only)
    first = report["first_departure"]
    print(f"first departure: {first['call']} ({first['summary'] or first['kind']})" if first else
          "no module departs beyond tolerance")
    print(f"report: {report['compare_result']}")
    return 0
