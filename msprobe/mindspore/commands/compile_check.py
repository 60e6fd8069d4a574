"""`msprobe -f mindspore compile_check`: the first cell whose mindspore.jit numerics part from PyNative."""
from msprobe.core.compile_report import add_script_arguments, check_script

DESCRIPTION = ("Run each sub-cell of the script's compile_target() network in PyNative and through "
               "mindspore.jit on the same inputs (forward and backward) and name the first cell whose jit "
               "output departs.")


def add_arguments(parser):
    add_script_arguments(parser)


def run(args):
    from msprobe.mindspore.compile_check import CompileCheckError, compile_check

    return check_script(args, compile_check, CompileCheckError)
