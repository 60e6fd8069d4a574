"""`msprobe -f {pytorch,mindspore} config_check -c A.zip B.zip -o OUT`: what differs between two run setups."""
DESCRIPTION = "Compare two config_check packs (environment, packages, hyperparameters, weights, data, random)."


def add_arguments(parser):
    parser.add_argument("-c", "--compare", nargs=2, metavar=("A_ZIP", "B_ZIP"), required=True,
                        help="two packs written by ConfigChecker (same rank of each run)")
    parser.add_argument("-o", "--output", "--output_path", dest="output", required=True,
                        help="folder for config_check_{time}.xlsx and .json")
    parser.add_argument("--top", type=int, default=15, help="how many differences to print (default 15)")


def run(args):
    from msprobe.core.config_check.compare import IMPACT_ORDER, compare_packs
    from msprobe.core.config_check.pack import CHECKS
    from msprobe.core.terminal import print_table

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
