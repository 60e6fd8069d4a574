"""`msprobe -f mindspore multi_run_ut`: MindSpore run_ut split over one worker process per -d device."""
from msprobe.core.run_ut.command import add_run_ut_arguments, execute_run_ut
from msprobe.core.run_ut.report import MINDSPORE_LAYOUT
from msprobe.mindspore.commands.run_ut import FACTORY

DESCRIPTION = "MindSpore run_ut over several worker processes (one per -d device id); same files as run_ut."


def add_arguments(parser):
    add_run_ut_arguments(parser, multi=True, pytorch=False)


def run(args):
    # MindSpore's runtime threads do not survive fork(): workers start fresh
    return execute_run_ut(args, FACTORY, MINDSPORE_LAYOUT, {}, multi=True, error_dir_name="error_data",
                          start_method="spawn", workers_per_device=1)
