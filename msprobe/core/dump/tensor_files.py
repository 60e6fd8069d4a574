"""A step's tensor files: snapshot a tensor now, write it later, and write a tensor seen twice only once.

    files = TensorFiles(adapter, writer)
    files.save(tensor, "Functional.linear.0.forward.output.0.pt", step, rank)   # snapshot + queued write
    files.forget(tensor)                                                      # changed behind its version
    files.new_step()

A tensor with the same memory, layout and version as one saved earlier in the step, and the same bits as
that snapshot, becomes a hard link to the first file (an output that is the next call's input). The bit
check is cheap next to a file write and catches memory reused or written behind the version counter
(collectives, numpy views).
"""

__all__ = ["TensorFiles"]


class TensorFiles:
    """Snapshots and queues tensor files through a DumpWriter, linking duplicates within a step."""

    def __init__(self, adapter, writer):
        self.adapter = adapter
        self.writer = writer
        self._saved = {}  # tensor identity -> (file name, snapshot)

    def save(self, tensor, file_name, step, rank):
        adapter = self.adapter
        key = adapter.tensor_identity(tensor)
        first = self._saved.get(key) if key is not None else None
        if first is not None and adapter.same_content(first[1], tensor):
            self.writer.link_tensor(step, rank, first[0], file_name)
            return
        snapshot = adapter.copy_for_save(tensor)
        if key is not None:
            self._saved[key] = (file_name, snapshot)
        self.writer.save_tensor(step, rank, snapshot, file_name)

    def forget(self, tensor):
        self._saved.pop(self.adapter.tensor_identity(tensor), None)

    def new_step(self):
        self._saved = {}
