"""The tensor task: statistics plus a file per tensor in dump_tensor_data/ (snapshot taken when described)."""
from msprobe.core.config_fields import COMMON_FIELDS, SUMMARY_MODE, Effect, Field, choice, unlisted
from msprobe.core.dump.tasks import Task, register_task

__all__ = ["TensorTask"]


@register_task("tensor")
class TensorTask(Task):
    """task "tensor": everything of "statistics", and each tensor's values in dump_tensor_data/{data_name}
    (".pt" for PyTorch, ".npy" for MindSpore); descriptors carry "data_name". A tensor seen twice in a
    step with the same bits (an output that is the next call's input) is written once and hard-linked.
    The section also takes the online run_ut keys (task online_run_ut).
    """

    saves_tensors = True
    config_fields = COMMON_FIELDS + (
        Field("file_format", choice("npy", "bin"), "npy", "MindSpore graph-mode kernel dump: `npy` or `bin`",
              effect=Effect("MindSpore level L2 only",
                            lambda fw, task, level, value: task == "tensor" and fw != "pytorch" and level == "L2")),
    ) + unlisted(SUMMARY_MODE)

    def tensor_seen(self, tensor, file_name, desc):
        desc["data_name"] = file_name
        self.context.save(tensor, file_name)
