"""GradTracker's gradient edges: a leaf's is its AccumulateGrad node, the one autograd accumulates into."""
import torch
from torch.autograd.graph import get_gradient_edge

from msprobe.pytorch.dump.grad_tracker import _edge_of


def test_leaf_edge_is_the_accumulate_grad_node_with_and_without_grad_mode():
    weight = torch.nn.Parameter(torch.randn(3, 3))
    expected = get_gradient_edge(weight).node
    assert type(expected).__name__ == "AccumulateGrad"
    assert _edge_of(weight) == (expected, 0)
    with torch.no_grad():
        assert _edge_of(weight) == (expected, 0)
    # the node found is the one the weight's gradient passes through: a post hook on it sees weight.grad
    seen = []
    handle = _edge_of(weight)[0].register_hook(lambda grad_inputs, grad_outputs: seen.append(grad_outputs[0]))
    (weight * 2).sum().backward()
    handle.remove()
    assert len(seen) == 1 and torch.equal(seen[0], weight.grad)


def test_non_leaf_edge_is_its_grad_fn_and_output_number():
    x = torch.randn(4, requires_grad=True)
    first, second = (x * 2).unbind(0)[1:3]
    assert _edge_of(second) == (second.grad_fn, second.output_nr) and second.output_nr == 2
    assert _edge_of(first)[1] == 1
