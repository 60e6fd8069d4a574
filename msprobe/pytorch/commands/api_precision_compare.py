"""`msprobe -f pytorch api_precision_compare`: judge NPU run_ut details against GPU ones (new standard)."""
from msprobe.core.precision.api_precision_compare import compare_details_csvs

DESCRIPTION = "Compare the run_ut details CSVs of two devices with the new precision standard."


def add_arguments(parser):
    parser.add_argument("-npu", "--npu_csv_path", dest="npu_csv_path", required=True,
                        help="accuracy_checking_details_{ts}.csv of the device under test")
    parser.add_argument("-gpu", "--gpu_csv_path", dest="gpu_csv_path", required=True,
                        help="accuracy_checking_details_{ts}.csv of the reference device")
    parser.add_argument("-o", "--out_path", dest="out_path", default="./", help="output directory (default ./)")


def run(args):
    compare_details_csvs(args.npu_csv_path, args.gpu_csv_path, args.out_path)
    return 0
