"""`msprobe -f mindspore run_ut`: check mint / Tensor APIs of a dump.json against a CPU high-precision bench."""
from msprobe.core.run_ut.command import add_run_ut_arguments, execute_run_ut
from msprobe.core.run_ut.report import MINDSPORE_LAYOUT
from msprobe.mindspore.framework import FRAMEWORK

DESCRIPTION = "MindSpore API pre-check: rerun each mint/Tensor API and compare with a high-precision CPU bench."
FACTORY = FRAMEWORK.run_ut_executor


def add_arguments(parser):
    add_run_ut_arguments(parser, multi=False, pytorch=False)


def run(args):
    return execute_run_ut(args, FACTORY, MINDSPORE_LAYOUT, {}, error_dir_name="error_data")
