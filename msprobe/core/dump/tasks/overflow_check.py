"""The overflow_check task: keep only the calls whose inputs or outputs hold inf/nan, with their tensor files."""
import math

from msprobe.core.config_fields import (COMMON_FIELDS, IGNORE_NON_FINITE, RAISE_AT_PRODUCER, Effect, Field, choice,
                                        integer, unlisted)
from msprobe.core.dump.stats import STAT_KEYS
from msprobe.core.dump.tasks import Task, register_task
from msprobe.core.log import logger
from msprobe.core.overflow.origin import NanOrigin

__all__ = ["OverflowCheck"]


@register_task("overflow_check")
class OverflowCheck(Task):
    """task "overflow_check": dump.json keeps only the calls (forward, backward, parameter gradients) whose
    inputs or outputs hold an inf or nan, as msprobe 1.2.1 does (a call fed inf/nan is flagged too), each with
    its statistics and its tensor files in dump_tensor_data/. Dumping stops after `overflow_nums` such calls.
    Each kept call's NaN-origin role (producer, propagator, consumer) goes to nan_origin.json.

    Cost: the statistics of every dumped call, as the statistics task computes them, and nothing more for a
    finite call; tensors are copied only for the calls kept. The decision is taken when the call has
    finished: an input the call changed in place gets no file (its statistics are those from before the call).
    """

    saves_tensors = True
    config_fields = unlisted(*COMMON_FIELDS) + (
        Field("overflow_nums", integer(1, allow=(-1,)), 1, "overflowing calls kept before dumping stops; `-1`: no "
              "limit"),
        Field("check_mode", choice("all", "aicore", "atomic"), "all", "`all`, `aicore` or `atomic` (MindSpore L2)",
              effect=Effect("MindSpore level L2 only", lambda fw, task, level, value: task == "overflow_check"
                            and fw != "pytorch" and level == "L2")),
        IGNORE_NON_FINITE, RAISE_AT_PRODUCER)

    def __init__(self, context):
        super().__init__(context)
        self.limit = context.config.overflow_nums
        self.count = 0
        section = context.config.section  # NaN origin: roles, ignore rules, raise (core/overflow/origin.py)
        self.origin = NanOrigin(context, section.get("ignore_non_finite"), section.get("raise_at_producer", False))

    def tensor_seen(self, tensor, file_name, desc):
        self.sink.append((tensor, file_name, desc))  # no copy yet: most calls are finite

    def admit(self, record):
        context = self.context
        context.resolve()  # deferred (device) statistics are needed now
        role = self.origin.role(record)
        if role is None:
            return False
        adapter = context.adapter
        for tensor, file_name, desc in record.tensors:
            if _same_statistics(adapter, tensor, desc):
                desc["data_name"] = file_name
                context.save(tensor, file_name)
        context.commit(record)
        self.count += 1
        logger.warning(f"msprobe overflow_check: inf/nan found in {record.name} ({role}).")
        self.origin.kept(record, role)
        if self.limit != -1 and self.count >= self.limit:
            context.finish(f"msprobe overflow_check: reached overflow_nums={self.limit}; dumping stops.")
        return False  # committed above

    def step_end(self):
        self.origin.step_end()

    def new_step(self):
        self.origin.new_step()


def _same_statistics(adapter, tensor, desc):
    """Whether the tensor still has the statistics it was described with (not changed in place since)."""
    stats = adapter.tensor_stats(tensor)
    if stats is not None and type(stats) is not tuple:
        stats = adapter.resolve_stats([stats])[0]
    recorded = tuple(desc.get(key) for key in STAT_KEYS)
    if stats is None:
        return all(value is None for value in recorded)
    return all(_same(a, b) for a, b in zip(stats, recorded))


def _same(a, b):
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b
