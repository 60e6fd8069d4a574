"""The tensor task: statistics plus a file per tensor in dump_tensor_data/ (snapshot taken when described)."""
from msprobe.core.dump.tasks import Task, register_task

__all__ = ["TensorTask"]


@register_task("tensor")
class TensorTask(Task):
    """task "tensor": everything of "statistics", and each tensor's values in dump_tensor_data/{data_name}
    (".pt" for PyTorch, ".npy" for MindSpore); descriptors carry "data_name". A tensor seen twice in a
    step with the same bits (an output that is the next call's input) is written once and hard-linked.

    config.json, "tensor" section:
      scope, list, data_mode   which calls and which of their inputs/outputs
      file_format              MindSpore L2 only ("npy" / "bin")
    """

    saves_tensors = True

    def tensor_seen(self, tensor, file_name, desc):
        desc["data_name"] = file_name
        self.collector.save_tensor_file(tensor, file_name)
