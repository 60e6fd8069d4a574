"""The `ckpt_compare` command line, shared by both frameworks (each passes the openers of its own formats)."""
from typing import Tuple

from msprobe.core.ckpt_compare.readers import Opener

DESCRIPTION = ("Compare two checkpoints parameter by parameter (shape, dtype, L2, cosine, max abs/rel difference; "
               "keys on one side only), worst first, as JSON and xlsx.")


def add_arguments(parser, formats: str) -> None:
    parser.add_argument("--ckpt1", required=True, help=f"first checkpoint: {formats}; or a folder: sharded "
                                                       "with an index file, save_pretrained, or a peft adapter")
    parser.add_argument("--ckpt2", required=True, help="second checkpoint (same kinds)")
    parser.add_argument("-o", "--output_path", "--output-path", dest="output_path", required=True,
                        help="folder for ckpt_compare_{time}.json and .xlsx")
    parser.add_argument("--key-map", "--key_map", dest="key_map", action="append", default=[],
                        help="rename ckpt1's keys before pairing: 'PATTERN=>REPLACEMENT' (Python regex, repeatable) "
                             "or a JSON/YAML file of {ckpt1 key: ckpt2 key}")
    parser.add_argument("--top", type=int, default=10, help="how many of the worst pairs to print (default 10)")


def run(args, openers: Tuple[Opener, ...]) -> int:
    from msprobe.core.ckpt_compare.compare import KeyMap, compare_checkpoints, print_summary

    result = compare_checkpoints(args.ckpt1, args.ckpt2, args.output_path, KeyMap.parse(args.key_map), openers)
    print_summary(result, top=max(0, args.top))
    return 0
