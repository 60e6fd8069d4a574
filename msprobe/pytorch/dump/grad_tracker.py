"""Backward data of an API or module call: grads w.r.t. its outputs and w.r.t. each tensor input.

Nothing is inserted into the autograd graph, so gradients accumulate exactly as without msprobe:

- grads w.r.t. outputs: `Tensor.register_hook` on the outputs (it observes, it does not add a node);
- grads w.r.t. inputs: before the call we note each grad-requiring input's gradient edge (its grad_fn
  and output_nr, or its AccumulateGrad node for a leaf) and the autograd sequence number; after the
  call we walk back from the outputs through the nodes created during the call (sequence number at
  least the noted one) and find the *consumers*: the nodes with an edge into an input. A post hook on
  each consumer receives the grads it sends along those edges; their sum is the call's grad for that
  input, summed in our own tensors (autograd's own sums are untouched).

Why not an alias `x.view_as(x)` passed instead of `x` (or full backward hooks, whose identity
Function does the same): the alias collects every use of `x` inside the call into one node, so
autograd sums `x`'s grad as `outside + (use1 + use2)` instead of `(outside + use1) + use2`. Floating
point addition is not associative: an RMSNorm (which uses its input twice) beside a residual branch
then changes the bits of every gradient below it.

The same tensor passed twice has one edge, hence one grad (its total over both uses). The backward
entry is emitted when every consumer has run (or, when no input needs a grad, when every output grad
arrived); entries still incomplete at the end of the step are emitted by `flush()` with null where
nothing arrived.
"""
import torch
from torch.autograd.graph import get_gradient_edge

__all__ = ["GradTracker"]

# the autograd sequence number the next node will get: non-public, listed in docs/architecture.md and guarded by
# tests/pytorch/dump/test_pt_torch_internals.py (as Node._sequence_nr below)
next_sequence_nr = torch._C._autograd._get_sequence_nr


_Tensor = torch.Tensor
_STRIDED = torch.strided


def _wants_grad(value):
    return isinstance(value, _Tensor) and _tensor_wants_grad(value)


def _tensor_wants_grad(tensor):
    # the dtype's own flags: the same answer as is_floating_point() / is_complex() without two bound-method
    # calls through torch's argument parser (this runs for every tensor input of a call with gradients)
    if not tensor.requires_grad or tensor.layout is not _STRIDED:
        return False
    dtype = tensor.dtype
    return dtype.is_floating_point or dtype.is_complex


def _edge_of(tensor):
    node = tensor.grad_fn
    if node is not None:
        return node, tensor.output_nr
    if torch.is_grad_enabled():
        # a leaf: its AccumulateGrad node, reached as get_gradient_edge does (through a view's grad_fn)
        # without its wrappers and checks (2.2 instead of 5 us; the hooks call begin() with grad enabled)
        return tensor.view_as(tensor).grad_fn.next_functions[0][0], 0
    return get_gradient_edge(tensor).node, 0


def flat_tensors(value, found):
    """Append every tensor inside lists, tuples and dicts (ModelOutput included) to `found`."""
    if isinstance(value, torch.Tensor):
        found.append(value)
    elif isinstance(value, (list, tuple)):
        for item in value:
            flat_tensors(item, found)
    elif isinstance(value, dict):
        for item in value.values():
            flat_tensors(item, found)
    return found


def _output_positions(output):
    """The outputs whose grads a backward entry lists: a tensor, the items of a list or tuple (None
    where an item is no tensor), or the values of a dict such as a HuggingFace ModelOutput."""
    if isinstance(output, torch.Tensor):
        return [output]
    if isinstance(output, (list, tuple)):
        return [item if isinstance(item, torch.Tensor) else None for item in output]
    if isinstance(output, dict):
        return [item if isinstance(item, torch.Tensor) else None for item in output.values()]
    return [None]


class PendingBackward:
    __slots__ = ("call", "args_layout", "kw_layout", "edges", "nodes", "seq_start", "input_grads",
                 "output_grads", "out_count", "contributions_left", "outputs_left", "done")

    def __init__(self, call):
        self.call = call
        self.args_layout = []    # per positional arg: None | slot | [slot|None, ...]
        self.kw_layout = []      # slots of tensor kwargs, in order
        self.edges = {}          # (id(node), output_nr) -> slot; a slot is that key itself
        self.nodes = []          # keeps the nodes of `edges` alive (their ids are the keys)
        self.seq_start = 0
        self.input_grads = {}
        self.output_grads = {}
        self.out_count = 0
        self.contributions_left = 0
        self.outputs_left = set()
        self.done = False


class GradTracker:
    """Notes input edges and hooks outputs of dumped calls; reports backward events to the collector.

    pause: a callable returning a context manager that keeps our own tensor ops out of the dump.
    """

    def __init__(self, collector, pause):
        self.collector = collector
        self.pause = pause
        self.handles = []  # the RemovableHandles of the hooks on outputs and consumer nodes
        self.pending = []
        # id(leaf) -> (leaf, its AccumulateGrad node) until removal: a parameter used by many calls of a step is asked
        # for its node once (a view op each time otherwise); holding the node keeps it the leaf's accumulator
        self._leaf_edges = {}

    # -- forward side -----------------------------------------------------------------------
    def begin(self, call, args, kwargs):
        """Before the call: note the gradient edge of every grad-requiring tensor input."""
        pending = PendingBackward(call)
        edges = pending.edges
        leaf_edges = self._leaf_edges

        def slot_of(tensor):
            node = tensor.grad_fn
            if node is not None:
                output_nr = tensor.output_nr
            else:
                known = leaf_edges.get(id(tensor))
                if known is not None and known[0] is tensor:
                    node = known[1]
                else:
                    node = _edge_of(tensor)[0]
                    leaf_edges[id(tensor)] = (tensor, node)
                output_nr = 0
            slot = (id(node), output_nr)
            if slot not in edges:
                edges[slot] = slot
                pending.nodes.append(node)
            return slot

        layout = pending.args_layout
        for arg in args:
            if isinstance(arg, _Tensor):  # the common case first: one isinstance for a tensor or a number
                layout.append(slot_of(arg) if _tensor_wants_grad(arg) else None)
            elif type(arg) in (list, tuple) and any(map(_wants_grad, arg)):
                layout.append([slot_of(item) if _wants_grad(item) else None for item in arg])
            else:
                layout.append(None)
        if kwargs:
            for key, value in kwargs.items():
                if key != "out" and _wants_grad(value):
                    pending.kw_layout.append(slot_of(value))
                elif isinstance(value, _Tensor):
                    pending.kw_layout.append(None)
        pending.seq_start = next_sequence_nr()
        return pending

    def watch_outputs(self, pending, output):
        """After the call: hook the output grads and the consumers of the inputs."""
        single = isinstance(output, _Tensor)  # most calls: one tensor out
        positions = (output,) if single else _output_positions(output)
        pending.out_count = len(positions)
        edges = pending.edges
        roots = []
        alone = None  # the one output whose grad the consumer hook of its own node may take
        for position, value in enumerate(positions):
            if isinstance(value, _Tensor) and value.requires_grad:
                node = value.grad_fn
                if node is None:
                    continue
                output_nr = value.output_nr
                pending.outputs_left.add(position)
                # an input returned unchanged (dropout with p=0 or in eval mode): its grad passes through
                through = edges.get((id(node), output_nr)) if edges else None
                if through is not None:
                    pending.contributions_left += 1
                if single and through is None and edges and type(value) is _Tensor:
                    alone = (value, node, output_nr)  # hooked after the walk, unless its node is a consumer
                else:
                    self.handles.append(value.register_hook(self._output_hook(pending, position, through)))
                if single:
                    roots.append((node, output_nr))
        merged = False
        if edges:
            if not single:
                for value in flat_tensors(output, []):  # nested outputs (LSTM's (h, c)) lead to inputs too
                    node = value.grad_fn
                    if node is not None:
                        roots.append((node, value.output_nr))
            merged = self._hook_consumers(pending, roots, alone)
        if alone is not None and not merged:
            self.handles.append(alone[0].register_hook(self._output_hook(pending, 0, None)))
        if pending.outputs_left or pending.contributions_left:
            self.pending.append(pending)

    def _hook_consumers(self, pending, roots, alone=None):
        """Hook the consumers of the inputs among the call's nodes; True when `alone` (a single plain tensor output,
        its node and output_nr) was hooked too: its node is a consumer, whose hook takes the output's grad from the
        grads the node received (one hook instead of two; a grad a hook of the user's on the output changed is
        seen changed, as the node itself sees it)."""
        edges, start = pending.edges, pending.seq_start
        seen = {}  # id -> node: holding the node keeps its id from being reused during the walk
        stack = []
        for node, output_nr in roots:
            # an output that is an input returned unchanged, or older than the call, has no consumer here
            if (id(node), output_nr) not in edges and node._sequence_nr() >= start and id(node) not in seen:
                seen[id(node)] = node
                stack.append(node)
        consumers = []
        while stack:
            node = stack.pop()
            links = None
            for index, (child, output_nr) in enumerate(node.next_functions):
                if child is None:
                    continue
                slot = edges.get((id(child), output_nr))
                if slot is not None:
                    if links is None:
                        links = []
                        consumers.append((node, links))
                    links.append((index, slot))
                elif child._sequence_nr() >= start and id(child) not in seen:
                    seen[id(child)] = child
                    stack.append(child)
        merged = False
        for node, links in consumers:
            pending.contributions_left += 1
            if alone is not None and node is alone[1]:
                merged = True
                hook = self._consumer_hook(pending, links, alone[2])
            else:
                hook = self._consumer_hook(pending, links)
            self.handles.append(node.register_hook(hook))
        return merged

    def _consumer_hook(self, pending, links, root=None):
        """The hook of a consumer node; root: the output_nr of the call's single output when the node is its own
        (the grad it received there is the output's grad)."""
        def on_grads_sent(grad_inputs, grad_outputs):
            if pending.done:
                return
            if root is not None and grad_outputs[root] is not None:
                pending.output_grads[0] = grad_outputs[root]
                pending.outputs_left.discard(0)
            input_grads = pending.input_grads
            for index, slot in links:
                grad = grad_inputs[index]
                if grad is not None:
                    if slot in input_grads:  # a second contribution: summed (_add_input_grad)
                        self._add_input_grad(pending, slot, grad)
                    else:
                        input_grads[slot] = grad
            pending.contributions_left -= 1
            if not pending.contributions_left:
                self._emit(pending)
        return on_grads_sent

    def _output_hook(self, pending, position, through=None):
        def on_output_grad(grad):
            if pending.done:
                return
            pending.output_grads[position] = grad
            pending.outputs_left.discard(position)
            if through is not None:
                self._add_input_grad(pending, through, grad)
                pending.contributions_left -= 1
            if not pending.outputs_left and not pending.contributions_left:
                self._emit(pending)
        return on_output_grad

    def _add_input_grad(self, pending, slot, grad):
        previous = pending.input_grads.get(slot)
        if previous is None:
            pending.input_grads[slot] = grad
        else:
            with self.pause():
                pending.input_grads[slot] = previous + grad

    # -- backward side ----------------------------------------------------------------------
    def _emit(self, pending):
        if pending.done:
            return
        pending.done = True
        grads = pending.input_grads
        of_inputs = []
        for layout in pending.args_layout:
            if isinstance(layout, list):
                of_inputs.append([grads.get(slot) if slot is not None else None for slot in layout])
            else:
                of_inputs.append(grads.get(layout) if layout is not None else None)
        of_inputs.extend(grads.get(slot) if slot is not None else None for slot in pending.kw_layout)
        of_outputs = [pending.output_grads.get(i) for i in range(pending.out_count)]
        # do not keep grads and graph nodes alive until the step ends
        pending.input_grads, pending.output_grads, pending.nodes = {}, {}, []
        with self.pause():
            try:  # raised inside autograd's backward it would abort the user's loss.backward()
                self.collector.backward(pending.call, of_outputs, of_inputs)
            except Exception as exc:  # noqa: BLE001
                self.collector.guard.report(pending.call.backward_name, exc)

    def flush(self):
        """Emit the entries whose grads arrived only partly (unused outputs, step end)."""
        for pending in self.pending:
            if not pending.done and (pending.input_grads or pending.output_grads):
                self._emit(pending)
        self.pending = [p for p in self.pending if not p.done]

    def remove(self):
        self.flush()
        for handle in self.handles:
            handle.remove()
        self.handles = []
        self.pending = []
        self._leaf_edges = {}

