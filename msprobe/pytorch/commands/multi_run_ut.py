"""`msprobe -f pytorch multi_run_ut`: run_ut split over N worker processes, same CSVs as run_ut."""
from msprobe.core.run_ut.command import add_run_ut_arguments, execute_run_ut
from msprobe.core.run_ut.report import PYTORCH_LAYOUT

DESCRIPTION = "run_ut over several worker processes (-n) and devices (-d); results identical to run_ut."


def add_arguments(parser):
    add_run_ut_arguments(parser, multi=True, pytorch=True)


def run(args):
    from msprobe.pytorch.api_accuracy_checker.executor import FACTORY, device_for

    return execute_run_ut(args, FACTORY, PYTORCH_LAYOUT, {"device": device_for(args.device_id[0])}, multi=True)
