"""Backward entries hold the right gradients: input = grads of the outputs, output = grads of each input."""
import pytest
import torch
import torch.nn.functional as F

from msprobe.pytorch import PrecisionDebugger
from pt_dump_helpers import load_rank, write_config


def _dump_one_call(tmp_path, fn, inputs, level="L1"):
    """Run fn(*inputs) under a tensor dump, backprop a fixed random cotangent, return (dump, files dir)."""
    debugger = PrecisionDebugger(config_path=write_config(tmp_path, "tensor", level))
    debugger.start()
    out = fn(*inputs)
    cotangent = torch.randn(out.shape, generator=torch.Generator().manual_seed(1))
    (out * cotangent).sum().backward()
    debugger.stop()
    debugger.close()
    root = tmp_path / "dump"
    dump, _, _ = load_rank(root)
    return dump["data"], root / "step0" / "rank" / "dump_tensor_data", cotangent


def _expected_grads(fn, inputs, cotangent):
    fresh = [x.detach().clone().requires_grad_(x.requires_grad) if isinstance(x, torch.Tensor) else x for x in inputs]
    wanted = [x for x in fresh if isinstance(x, torch.Tensor) and x.requires_grad]
    grads = iter(torch.autograd.grad(fn(*fresh), wanted, cotangent))
    return [next(grads) if isinstance(x, torch.Tensor) and x.requires_grad else None for x in fresh]


def _gen(*shape, grad=True, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).requires_grad_(grad)


CASES = {
    "Functional.linear": (lambda x, w, b: F.linear(x, w, b), lambda: [_gen(4, 3), _gen(5, 3, seed=1), _gen(5, seed=2)]),
    "Torch.matmul": (lambda a, b: torch.matmul(a, b), lambda: [_gen(2, 4, 3), _gen(3, 6, seed=1)]),
    "Functional.layer_norm": (lambda x, w, b: F.layer_norm(x, (6,), w, b),
                              lambda: [_gen(3, 6), _gen(6, seed=1), _gen(6, seed=2)]),
    "Functional.softmax": (lambda x: F.softmax(x, dim=-1), lambda: [_gen(3, 7)]),
    "Functional.embedding": (lambda idx, w: F.embedding(idx, w),
                             lambda: [torch.tensor([[0, 2, 2], [1, 3, 0]]), _gen(4, 5, seed=1)]),
    "Torch.matmul(no grad for a)": (lambda a, b: torch.matmul(a, b), lambda: [_gen(4, 3, grad=False), _gen(3, 2)]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_backward_entry_matches_autograd_grad(tmp_path, case):
    fn, make_inputs = CASES[case]
    inputs = make_inputs()
    data, files, cotangent = _dump_one_call(tmp_path, fn, inputs)
    api = case.split("(")[0]
    entry = data[f"{api}.0.backward"]
    forward = data[f"{api}.0.forward"]
    assert len(entry["input"]) == 1
    got_out_grad = torch.load(files / entry["input"][0]["data_name"])
    assert torch.equal(got_out_grad, cotangent)
    expected = _expected_grads(fn, inputs, cotangent)
    n_forward_inputs = len(forward["input_args"]) + sum(
        1 for v in forward["input_kwargs"].values() if isinstance(v, dict) and v.get("type") == "torch.Tensor")
    assert len(entry["output"]) == n_forward_inputs
    got_descs = [d for d in entry["output"] if d is not None]
    wanted = [g for g in expected if g is not None]
    assert len(got_descs) == len(wanted)
    for desc, want in zip(got_descs, wanted):
        got = torch.load(files / desc["data_name"])
        assert got.shape == want.shape
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
        assert desc["shape"] == list(want.shape)


def test_same_tensor_twice_gets_its_total_grad(tmp_path):
    """An input passed twice gets one alias (attention code tests `query is key`)."""
    x = _gen(3, 3)
    data, files, cot = _dump_one_call(tmp_path, lambda a: torch.mul(a, a), [x])
    entry = data["Torch.mul.0.backward"]
    assert len(entry["output"]) == 2
    torch.testing.assert_close(torch.load(files / entry["output"][0]["data_name"]), 2 * x.detach() * cot)


def test_module_backward_grads_in_L0(tmp_path):
    torch.manual_seed(0)
    lin = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh())
    x = _gen(2, 3)
    debugger = PrecisionDebugger(config_path=write_config(tmp_path, "tensor", "L0"), model=lin)
    debugger.start()
    out = lin(x)
    cot = torch.ones_like(out)
    out.backward(cot)
    debugger.stop()
    debugger.close()
    dump, _, construct = load_rank(tmp_path / "dump")
    files = tmp_path / "dump" / "step0" / "rank" / "dump_tensor_data"
    entry = dump["data"]["Module.0.Linear.backward.0"]
    x2 = x.detach().clone().requires_grad_()
    hidden = lin[0](x2)
    hidden.retain_grad()
    lin[1](hidden).backward(cot)
    torch.testing.assert_close(torch.load(files / entry["input"][0]["data_name"]), hidden.grad)
    torch.testing.assert_close(torch.load(files / entry["output"][0]["data_name"]), x2.grad)
    pgrad = dump["data"]["Module.0.Linear.parameters_grad"]
    assert list(pgrad) == ["weight", "bias"] and pgrad["weight"][0]["shape"] == [4, 3]
    assert set(construct) >= {"Module.0.Linear.forward.0", "Module.1.Tanh.backward.0"}
    assert not any(name.startswith(("Functional", "Torch", "Tensor")) for name in dump["data"])
