"""`msprobe -f {pytorch,mindspore} config_check -c A.zip B.zip -o OUT`: what differs between two run setups;
`config_check -d [launch.sh config.yaml ...] [-o pack.zip]` (26.x's form) packs this machine's setup without a run."""
DESCRIPTION = "Compare two config_check packs (environment, packages, hyperparameters, weights, data, random)."


def add_arguments(parser):
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("-c", "--compare", nargs=2, metavar=("A_ZIP", "B_ZIP"),
                      help="two packs written by ConfigChecker (same rank of each run)")
    mode.add_argument("-d", "--dump", nargs="*", metavar="FILE",
                      help="pack this machine's setup (environment, packages, framework) and the hyperparameters of "
                           "the launch scripts (.sh) and config files (.yaml/.yml) given, into -o (default "
                           "./config_check_pack.zip); weights, data and random draws need ConfigChecker in the run")
    parser.add_argument("-o", "--output", "--output_path", dest="output", default=None,
                        help="-c: folder for config_check_{time}.xlsx and .json (default ./config_check_result); "
                             "-d: the pack's .zip path")
    parser.add_argument("--top", type=int, default=15, help="how many differences to print (default 15)")


def run(args, fmk="pytorch"):
    if args.dump is not None:
        return _pack(args, fmk)
    from msprobe.core.config_check.compare import IMPACT_ORDER, compare_packs
    from msprobe.core.config_check.pack import CHECKS
    from msprobe.core.terminal import print_table

    args.output = args.output or "./config_check_result"
    found, xlsx_path, json_path = compare_packs(args.compare[0], args.compare[1], args.output)
    counts = {impact: sum(d.impact == impact for d in found) for impact in IMPACT_ORDER}
    per_check = ", ".join(f"{check} {n}" for check in CHECKS if (n := sum(d.check == check for d in found)))
    print(f"config_check: {len(found)} differences ({counts['high']} high, {counts['medium']} medium, "
          f"{counts['low']} low impact){': ' + per_check if per_check else ''}.")
    shown = found[:max(0, args.top)]
    if shown:
        print_table(f"most likely to change numerics ({len(shown)} of {len(found)})",
                    ["impact", "check", "item", "A", "B"],
                    [[d.impact, d.check, d.item, str(d.a)[:60], str(d.b)[:60]] for d in shown],
                    styles=["red" if d.impact == "high" else "yellow" if d.impact == "medium" else None
                            for d in shown])
    print(f"report: {xlsx_path}\n        {json_path}")
    return 0


def _pack(args, fmk):
    from msprobe.core.config_check.pack import ConfigChecker

    files = list(args.dump)
    yaml_files = [f for f in files if f.endswith((".yaml", ".yml"))]
    checker = ConfigChecker(output_zip_path=args.output or "./config_check_pack.zip", fmk=fmk,
                            shell_path=[f for f in files if f not in yaml_files], yaml_path=yaml_files)
    print(f"config_check: this machine's setup packed into {checker.path}")
    return 0
