"""enable_dataloader: each batch a torch DataLoader hands out is one dumped step.

With `"enable_dataloader": true` (PyTorch, single process) the training script needs no
start/stop/step: every `next()` on a DataLoader iterator ends the step of the previous batch (stop +
step) and starts the next one. After the last step of the config's `step` list has been written,
every DataLoader iteration ends at once (StopIteration), so the training loop finishes as if the
data had run out and the code after it runs normally; the debugger's files are complete by then.
With an empty `step` list every batch is dumped until the data ends.

The patch on `_BaseDataLoaderIter.__next__` lives from PrecisionDebugger(...) to close() (or the
end of the last step) and is undone through a HookSession like every other hook.
"""
from msprobe.core.dump.session import HookSession
from msprobe.core.log import logger

__all__ = ["DataLoaderDriver"]


class DataLoaderDriver:
    """Drives `debugger` (a PrecisionDebugger) from DataLoader iteration."""

    def __init__(self, debugger):
        from torch.utils.data.dataloader import _BaseDataLoaderIter

        self.debugger = debugger
        self.in_step = False
        self.finished = False
        self.hooks = HookSession()
        original = _BaseDataLoaderIter.__next__

        def __next__(iterator):
            return self.next_batch(iterator, original)

        __next__.__wrapped__ = original
        with self.hooks.installing():
            self.hooks.patch(_BaseDataLoaderIter, "__next__", __next__)

    def next_batch(self, iterator, original):
        debugger = self.debugger
        if self.in_step:  # the previous batch's step is over
            self.in_step = False
            debugger.next_step()
        if self.finished or debugger.collector.all_steps_done():
            self._finish()
            raise StopIteration
        batch = original(iterator)  # the end of an epoch ends no step: the next batch continues
        debugger.begin_window()
        self.in_step = True
        return batch

    def _finish(self):
        if not self.finished:
            self.finished = True
            self.debugger.collector.close()  # every file written before the script goes on
            logger.info(f"msprobe enable_dataloader: steps {self.debugger.config.step} are dumped; the "
                        "DataLoader iteration ends here, as the config asks (training stops).")

    def start(self):
        """The user's start() does nothing: the next batch starts the step."""

    def step(self):
        """The user's step() does nothing: the next batch ends the step."""

    def close(self):
        """Remove the patch (the step in progress, if any, is ended by the debugger's close())."""
        self.hooks.close()
