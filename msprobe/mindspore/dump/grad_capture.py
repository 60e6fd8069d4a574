"""Backward capture for one PyNative call, observed without changing the gradient computation.

Nothing is inserted into the autograd graph: an identity node or a `HookBackward` / `CellBackwardHook`
in front of an input changes the order in which MindSpore sums the gradients of that input, and so
the bits of the training (measured: 29 of 40 gradients of a two-layer attention model moved, up to
3e-8). Each dumped call made under a gradient transform (ms.grad / value_and_grad) instead gets:
  * a tensor hook on every floating output: the gradient flowing into the call (backward "input");
  * for an API call, the gradient it sends to each floating input alone (backward "output"), computed
    when the output gradients are complete by `ms.vjp` of the call on its own inputs, outside the
    training graph (a tensor hook on an input would give its total gradient, summed over all of
    its consumers). Random APIs (dropout...) are not replayed: a second run draws another mask (saving
    and restoring `get_rng_state` does not bring back the mask of ops.dropout on the CPU), so their
    backward "output" is null.
  * for a Cell (L0), a tensor hook on every floating input: its gradient as the training computes it.
When every hook has fired the backward entry is committed; `flush_pending` commits calls whose
hooks never all fired (an output nobody used) with null for the missing gradients.
"""
__all__ = ["GradGather", "CallReplay", "grad_enabled", "is_float_tensor", "flush_pending", "is_random_api"]

_FLOAT_DTYPES = None
# name parts of the APIs that draw random numbers: a replay would not reproduce them
_RANDOM_PARTS = ("dropout", "rand", "bernoulli", "multinomial", "normal", "uniform", "rrelu", "gumbel")


def _float_dtypes():
    global _FLOAT_DTYPES
    if _FLOAT_DTYPES is None:
        import mindspore as ms
        _FLOAT_DTYPES = {ms.float16, ms.float32, ms.float64, ms.bfloat16}
    return _FLOAT_DTYPES


def is_float_tensor(value, tensor_type):
    return isinstance(value, tensor_type) and value.dtype in _float_dtypes()


def is_random_api(key):
    lowered = key.lower()
    return any(part in lowered for part in _RANDOM_PARTS)


def grad_enabled():
    """True while PyNative records a graph for a gradient transform."""
    from mindspore.common.api import _pynative_executor
    return bool(_pynative_executor.requires_grad())


class CallReplay:
    """What `input_grads` needs to differentiate one call again: the function, its arguments and the
    positions of its floating inputs."""

    __slots__ = ("function", "args", "kwargs", "positions")

    def __init__(self, function, args, kwargs, tensor_type):
        self.function, self.args, self.kwargs = function, args, kwargs
        self.positions = [i for i, arg in enumerate(args) if is_float_tensor(arg, tensor_type)]

    def input_grads(self, outputs, out_grads):
        """[gradient the call sends to each positional argument (None for non-floating ones)]."""
        import mindspore
        from mindspore import ops  # mint.zeros_like has no CPU kernel for some dtypes
        args, positions = self.args, self.positions
        grads = [None] * len(args)
        if not positions:
            return grads

        def call(*tensors):
            call_args = list(args)
            for position, tensor in zip(positions, tensors):
                call_args[position] = tensor
            return self.function(*call_args, **self.kwargs)
        # new tensor objects cut from the training graph: the same tensor passed twice (x * x) must be
        # two variables (mindspore.Tensor(t) of a tensor ms.grad differentiates is not cut: zero grads)
        primals = [ops.stop_gradient(args[p]) for p in positions]
        sens = tuple(g if g is not None else ops.zeros_like(o) for o, g in zip(outputs, out_grads))
        produced, vjp_fn = mindspore.vjp(call, *primals)
        found = vjp_fn(sens if isinstance(produced, (tuple, list)) else sens[0])
        found = found if isinstance(found, (tuple, list)) else (found,)
        for position, grad in zip(positions, found):
            grads[position] = grad
        return grads

    def clear(self):
        self.function = self.args = self.kwargs = None


class GradGather:
    """Gradients of one call, filled by hooks; `commit(call, grads_of_outputs, grads_of_inputs)`.

    With a `replay` the input gradients are computed from the output ones when those are complete;
    without one they come from hooks on the inputs (`watch_input`)."""

    __slots__ = ("call", "outputs", "out_grads", "in_grads", "remaining", "arrived", "commit", "done",
                 "pending", "replay")

    def __init__(self, call, n_inputs, commit, pending, replay=None):
        self.call = call
        self.outputs = []
        self.out_grads = []
        self.in_grads = [None] * n_inputs
        self.remaining = 0
        self.arrived = 0
        self.commit = commit
        self.done = False
        self.pending = pending  # the owner's list of open gathers
        self.replay = replay
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

    def watch_outputs(self, output, tensor_type):
        """Hook every floating output; False when there is none (no backward entry)."""
        self.outputs = list(output) if isinstance(output, (tuple, list)) else [output]
        self.out_grads = [None] * len(self.outputs)
        watched = False
        for index, out in enumerate(self.outputs):
            if is_float_tensor(out, tensor_type):
                out.register_hook(self._hook(self.out_grads, index))
                self.remaining += 1
                watched = True
        return watched

    def watch_input(self, tensor, index):
        """Hook on the input tensor itself: its gradient as the training sums it (no node added)."""
        tensor.register_hook(self._hook(self.in_grads, index))
        self.remaining += 1

    def finish(self):
        if self.done:
            return
        commit, call, replay = self.commit, self.call, self.replay
        outputs, out_grads, in_grads = list(self.outputs), list(self.out_grads), list(self.in_grads)
        self.replay = None  # kept for the commit
        self.close()
        try:
            commit(call, out_grads, in_grads, replay, outputs)
        finally:
            if replay is not None:
                replay.clear()

    def close(self):
        """Done: forget the call, the gradients and the owner. MindSpore may keep the tensor hooks
        (and so this object) after the step; they must not keep a closed debugger alive."""
        self.done = True
        try:
            self.pending.remove(self)
        except (ValueError, AttributeError):
            pass
        if self.replay is not None:
            self.replay.clear()
        self.call = self.commit = self.pending = self.replay = None
        self.outputs = []
        self.out_grads.clear()  # in place: the hooks hold these lists
        self.in_grads.clear()


def flush_pending(pending):
    """Commit every gather still open (some hooks never fired)."""
    for gather in list(pending):
        if gather.arrived:
            gather.finish()
        else:
            gather.close()
