"""The run_ut entry of the task registry: its config.json section (run_ut runs in its own command)."""
from msprobe.core.config_fields import ONLINE_FIELDS, Field, boolean, ranges, string, string_list, unlisted
from msprobe.core.dump.tasks import Task, register_task
from msprobe.core.ranges import IndexRanges

__all__ = ["RunUt"]


@register_task("run_ut")
class RunUt(Task):
    """task "run_ut": the API accuracy checker. `msprobe -f pytorch run_ut` (or mindspore) re-runs the APIs of
    a dump on the bench side and judges each one (docs/api_checker.md); with is_online it is the bench side
    of online run_ut (docs/online_run_ut.md). It does not run inside PrecisionDebugger: the section is read
    by the command's -config option.
    """

    collects = False
    config_fields = (
        Field("white_list", string_list, [], "API names to check (empty: all)"),
        Field("black_list", string_list, [], "API names never checked"),
        Field("error_data_path", string, "./", "where inputs and outputs of failing APIs are written"),
    ) + unlisted(
        Field("is_online", boolean, False, "be the bench side of online run_ut"),
        *ONLINE_FIELDS,
        Field("rank_list", ranges, IndexRanges([(0, 0)]), "online: ranks checked (same syntax as `rank`)"),
    )
