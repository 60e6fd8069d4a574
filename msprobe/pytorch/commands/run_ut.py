"""`msprobe -f pytorch run_ut`: check every API of a dump.json against a CPU high-precision bench."""
from msprobe.core.errors import ConfigError
from msprobe.core.run_ut.command import add_run_ut_arguments, execute_run_ut
from msprobe.core.run_ut.online.command import make_api_info_optional, online_section, run_online_bench
from msprobe.core.run_ut.report import PYTORCH_LAYOUT
from msprobe.pytorch.framework import FRAMEWORK

DESCRIPTION = "API accuracy pre-check: rerun each dumped API on the device and on a CPU high-precision bench."
# imported where the APIs run (here, or in each multi_run_ut worker), never by a multi_run_ut parent
FACTORY = FRAMEWORK.run_ut_executor
ONLINE_RUNNER = FRAMEWORK.online_runner


def add_arguments(parser):
    add_run_ut_arguments(parser, multi=False, pytorch=True)
    make_api_info_optional(parser)  # online run_ut (run_ut.is_online in -config) reads no dump


def run(args):
    section = online_section(args.config_path)
    if section is not None:
        return run_online_bench(args, section, ONLINE_RUNNER)
    if not args.api_info_file:
        raise ConfigError("run_ut: -api_info DUMP_JSON is required (or -config with run_ut.is_online: true).")
    return execute_run_ut(args, FACTORY, PYTORCH_LAYOUT, {})
