"""Backward capture for one PyNative API call through tensor gradient hooks.

MindSpore has no per-call backward hook for functions, so each dumped call made under a gradient
transform (ms.grad / value_and_grad) gets:
  * a hook on every floating output: the gradient flowing into the call (backward "input");
  * an identity node in front of every floating input, with a hook: the gradient the call sends to
    that input alone (backward "output"), not the sum over all consumers of the input.
When every hook has fired the backward entry is committed; `flush_pending` commits calls whose
hooks never all fired (an output nobody used) with null for the missing gradients.
"""
__all__ = ["GradGather", "grad_enabled", "is_float_tensor", "flush_pending"]

_FLOAT_DTYPES = None


def _float_dtypes():
    global _FLOAT_DTYPES
    if _FLOAT_DTYPES is None:
        import mindspore as ms
        _FLOAT_DTYPES = {ms.float16, ms.float32, ms.float64, ms.bfloat16}
    return _FLOAT_DTYPES


def is_float_tensor(value, tensor_type):
    return isinstance(value, tensor_type) and value.dtype in _float_dtypes()


def grad_enabled():
    """True while PyNative records a graph for a gradient transform."""
    from mindspore.common.api import _pynative_executor
    return bool(_pynative_executor.requires_grad())


class GradGather:
    """Gradients of one call, filled by hooks; `commit(call, grads_of_outputs, grads_of_inputs)`."""

    __slots__ = ("call", "out_grads", "in_grads", "remaining", "arrived", "commit", "done", "pending")

    def __init__(self, call, n_outputs, n_inputs, commit, pending):
        self.call = call
        self.out_grads = [None] * n_outputs
        self.in_grads = [None] * n_inputs
        self.remaining = 0
        self.arrived = 0
        self.commit = commit
        self.done = False
        self.pending = pending  # the owner's list of open gathers
        pending.append(self)

    def _hook(self, slots, index):
        def hook(grad):
            if self.done:  # closed: slots may be gone
                return None
            if slots[index] is None:
                self.remaining -= 1
                self.arrived += 1
            slots[index] = grad
            if self.remaining <= 0:
                self.finish()
            return None
        return hook

    def watch_output(self, tensor, index):
        tensor.register_hook(self._hook(self.out_grads, index))
        self.remaining += 1

    def watch_input(self, tensor, index):
        """Returns the identity node that must replace `tensor` in the call."""
        from mindspore import ops
        node = ops.identity(tensor)
        node.register_hook(self._hook(self.in_grads, index))
        self.remaining += 1
        return node

    def finish(self):
        if self.done:
            return
        commit, call, out_grads, in_grads = self.commit, self.call, list(self.out_grads), list(self.in_grads)
        self.close()
        commit(call, out_grads, in_grads)

    def close(self):
        """Done: forget the call, the gradients and the owner. MindSpore may keep the tensor hooks
        (and so this object) after the step; they must not keep a closed debugger alive."""
        self.done = True
        try:
            self.pending.remove(self)
        except (ValueError, AttributeError):
            pass
        self.call = self.commit = self.pending = None
        self.out_grads.clear()  # in place: the hooks hold these lists
        self.in_grads.clear()


def flush_pending(pending):
    """Commit every gather still open (some hooks never fired)."""
    for gather in list(pending):
        if gather.arrived:
            gather.finish()
        else:
            gather.close()
