"""`msprobe -f pytorch op_generate`: write a standalone script that reproduces one dumped API."""

DESCRIPTION = "Generate <api>.<forward|backward>.py reproducing one API of a dump (random or real data)."


def add_arguments(parser):
    parser.add_argument("-i", "--config_input", dest="config_input", required=True, help="config_op.json")
    parser.add_argument("-o", "--api_output_path", dest="api_output_path", required=True,
                        help="directory for the generated script")


def run(args):
    from msprobe.pytorch.api_accuracy_checker.op_generator import generate_script, load_op_config

    generate_script(load_op_config(args.config_input), args.api_output_path)
    return 0
