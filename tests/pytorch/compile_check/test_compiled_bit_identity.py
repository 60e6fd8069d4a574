"""Training a torch.compile'd (Inductor) bfloat16 model under the debugger: bit-identical at L1 and L2; at
L0/mix each dumped step trains exactly like the model compiled module by module (the graph is broken at
module boundaries to observe them), which is not bit-identical with the whole-model compile."""
import pytest
import torch
import torch.nn as nn

from msprobe.pytorch import PrecisionDebugger


def _train(level, dump_path, per_module=False):
    """3 SGD steps of a bf16 model compiled with Inductor (whole, or each submodule on its own); the
    parameters after. With `level`, every step runs under the debugger."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.LayerNorm(16), nn.GELU(), nn.Linear(16, 4)).to(torch.bfloat16)
    if per_module:
        for module in model:
            module.compile(backend="inductor")
        compiled = model
    else:
        compiled = torch.compile(model, backend="inductor")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    debugger = None
    if level:
        debugger = PrecisionDebugger(task="statistics", level=level, dump_path=str(dump_path), model=compiled)
    generator = torch.Generator().manual_seed(1)
    for _ in range(3):
        x = torch.randn(5, 8, generator=generator).to(torch.bfloat16)
        if debugger:
            debugger.start()
        compiled(x).float().pow(2).mean().backward()
        optimizer.step()
        optimizer.zero_grad()
        if debugger:
            debugger.stop()
            debugger.step()
    if debugger:
        debugger.close()
    return [p.detach().clone() for p in model.parameters()]


def _same(a, b):
    return all(torch.equal(x, y) for x, y in zip(a, b))


@pytest.fixture(scope="module")
def references():
    return _train(None, None), _train(None, None, per_module=True)


@pytest.mark.parametrize("level", ["L1", "L2"])
def test_bf16_compiled_training_is_bit_identical_at_api_and_aten_levels(tmp_path, references, level):
    whole, _ = references
    assert _same(_train(level, tmp_path), whole)


@pytest.mark.parametrize("level", ["L0", "mix"])
def test_bf16_l0_dump_trains_like_the_model_compiled_module_by_module(tmp_path, references, level):
    whole, per_module = references
    debugged = _train(level, tmp_path)
    # the window's compile, broken at every module boundary, is exactly the per-module compile ...
    assert _same(debugged, per_module)
    # ... and fusing across boundaries (LayerNorm -> GELU kept in float32 inside one kernel) rounds otherwise
    assert not _same(per_module, whole)
