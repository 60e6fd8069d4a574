"""`msprobe -f pytorch run_ut`: check every API of a dump.json against a CPU high-precision bench."""
from msprobe.core.run_ut.command import add_run_ut_arguments, execute_run_ut
from msprobe.core.run_ut.report import PYTORCH_LAYOUT

DESCRIPTION = "API accuracy pre-check: rerun each dumped API on the device and on a CPU high-precision bench."
# imported where the APIs run (here, or in each multi_run_ut worker), never by a multi_run_ut parent
FACTORY = "msprobe.pytorch.api_accuracy_checker.executor:make_executor"


def add_arguments(parser):
    add_run_ut_arguments(parser, multi=False, pytorch=True)


def run(args):
    return execute_run_ut(args, FACTORY, PYTORCH_LAYOUT, {})
