"""The flight_recorder task: keep the last N call records in memory; write them only when inf/nan appears."""
import collections

from msprobe.core.config_fields import COMMON_FIELDS, IGNORE_NON_FINITE, RAISE_AT_PRODUCER, Field, boolean, integer, unlisted
from msprobe.core.dump.tasks import Task, register_task
from msprobe.core.log import logger
from msprobe.core.overflow.origin import NanOrigin

__all__ = ["FlightRecorder"]


@register_task("flight_recorder")
class FlightRecorder(Task):
    """task "flight_recorder": a ring buffer of the last `depth` dumped records (statistics, and tensors
    with save_tensors) of the current step. Nothing is written while every value is finite. The first
    record with an inf/nan (input or output, after the ignore rules) is written to the step's dump.json
    together with the records before it (oldest first; stack.json, construct.json alike), its NaN-origin
    role goes to nan_origin.json, and recording stops. The window does not reach back across step().

    Cost while nothing overflows: the statistics of every recorded call (like a statistics dump without
    its files), plus one tensor copy per tensor with save_tensors.
    """

    config_fields = unlisted(*COMMON_FIELDS) + unlisted(
        Field("depth", integer(1), 64, "records kept before the non-finite one"),
        Field("save_tensors", boolean, False, "also keep a copy of every recorded tensor (memory!)"),
        IGNORE_NON_FINITE, RAISE_AT_PRODUCER)

    def __init__(self, context):
        super().__init__(context)
        section = context.config.section
        self.depth = section.get("depth", 64)
        self.save_tensors = bool(section.get("save_tensors", False))
        self.saves_tensors = self.save_tensors
        if self.save_tensors:
            self.tensor_seen = self._keep_tensor
        self.origin = NanOrigin(context, section.get("ignore_non_finite"), section.get("raise_at_producer", False))
        self.ring = collections.deque(maxlen=self.depth)
        self.triggered = False

    def _keep_tensor(self, tensor, file_name, desc):
        # copied now: the tensor may change in place before the ring is written (or never be written)
        self.sink.append((self.context.adapter.copy_for_save(tensor), file_name, desc))

    def admit(self, record):
        context = self.context
        context.resolve()  # the statistics are needed now to see an inf/nan
        role = self.origin.role(record)
        if role is None:
            self.ring.append(record)
            return False
        held = list(self.ring)
        self.ring.clear()
        for earlier in held + [record]:
            for snapshot, file_name, desc in earlier.tensors:
                desc["data_name"] = file_name
                # already a copy_for_save snapshot (a numpy array on MindSpore): written as it is
                context.write_snapshot(snapshot, file_name)
            context.commit(earlier)
        self.triggered = True
        logger.warning(f"msprobe flight_recorder: inf/nan in {record.name} ({role}); wrote it with the "
                       f"{len(held)} record(s) before it.")
        try:
            self.origin.kept(record, role)
        finally:
            context.finish("msprobe flight_recorder: recording stops after the first inf/nan.")
        return False

    def step_end(self):
        self.origin.step_end()

    def new_step(self):
        self.ring.clear()
        self.origin.new_step()
