"""`statistics.tensor_list` (a key msprobe 26.x users bring): the statistics task, plus real tensors for chosen calls."""
import re

from msprobe.core.dump.tasks import Task, register_task

__all__ = ["StatisticsWithTensors"]

# "Functional.linear.0.forward.input.0.pt" -> "Functional.linear.0.forward": the call a tensor file belongs to
_CALL_OF_FILE = re.compile(r"^(.*?\.(?:forward|backward))\.")


@register_task("statistics_tensor_list")
class StatisticsWithTensors(Task):
    """task "statistics" with a non-empty `tensor_list`: dump.json as the statistics task writes it, and the
    tensors of every call whose name (e.g. "Functional.linear.0.forward", "Module.fc1.Linear.forward.0")
    contains one of the list's strings also in dump_tensor_data/, named by `data_name` as the tensor task names
    them. The other calls cost what they cost in the statistics task.
    """

    saves_tensors = True

    def __init__(self, context):
        super().__init__(context)
        self.parts = tuple(context.config.section.get("tensor_list") or ())

    def tensor_seen(self, tensor, file_name, desc):
        match = _CALL_OF_FILE.match(file_name)
        call = match.group(1) if match else file_name
        if any(part in call for part in self.parts):
            desc["data_name"] = file_name
            self.context.save(tensor, file_name)
