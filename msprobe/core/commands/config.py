"""`msprobe -f {pytorch,mindspore} config`: the config.json reference, generated from the task registry."""
import sys

DESCRIPTION = "print the config.json reference of the tasks (from their declarations), or the default config.json"


def add_arguments(parser):
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--explain", nargs="?", const="", metavar="TASK",
                       help="what a task does and the keys of its section (every task without TASK)")
    group.add_argument("--default", action="store_true", help="print the packaged default config.json")
    group.add_argument("--markdown", action="store_true", help="print the reference part of docs/config.md")


def run(args):
    from msprobe.core import config_reference

    if args.default:
        text = config_reference.default_config_text()
    elif args.markdown:
        text = config_reference.markdown_reference() + "\n"
    else:
        text = config_reference.explain(args.explain or None) + "\n"
    sys.stdout.write(text)
    return 0
