"""Training under the debugger is bit-identical to training without it, at every level and task."""
import pytest
import torch

from hf_models import ResidualStack, tiny_gpt2, tiny_llama, train_lm
from msprobe.pytorch import PrecisionDebugger
from pt_dump_helpers import MLP, ConvNet, SampleNet, TinyTransformer, load_rank, train, write_config

MODELS = {"residual": ResidualStack, "llama": tiny_llama, "gpt2": tiny_gpt2}


def _assert_same_training(plain, dumped):
    (plain_losses, plain_grads), (dumped_losses, dumped_grads) = plain, dumped
    for step, (want, got) in enumerate(zip(plain_losses, dumped_losses)):
        assert torch.equal(want, got), f"step {step} loss {got.item().hex()} != {want.item().hex()}"
    for step, (want, got) in enumerate(zip(plain_grads, dumped_grads)):
        assert want.keys() == got.keys()
        differ = [name for name in want if not torch.equal(want[name], got[name])]
        assert not differ, f"step {step}: {len(differ)} of {len(want)} gradients differ: {differ[:5]}"


def _train_twice(tmp_path, make, task, level):
    torch.manual_seed(0)
    plain_model = make()
    torch.manual_seed(0)
    dumped_model = make()
    plain = train_lm(plain_model)
    debugger = PrecisionDebugger(config_path=write_config(tmp_path, task, level), model=dumped_model)
    dumped = train_lm(dumped_model, debugger)
    debugger.close()
    return plain, dumped, debugger


@pytest.mark.parametrize("level", ["L0", "L1", "mix", "L2"])
@pytest.mark.parametrize("model", sorted(MODELS))
def test_losses_and_gradients_are_bit_identical(tmp_path, model, level):
    plain, dumped, debugger = _train_twice(tmp_path, MODELS[model], "statistics", level)
    _assert_same_training(plain, dumped)
    assert not debugger.collector.guard.failed
    dump, _, _ = load_rank(tmp_path / "dump", step=1)
    assert dump["data"]  # the debugger did record the step


@pytest.mark.parametrize("model,level", [("llama", "mix"), ("gpt2", "L0")])
def test_tensor_mode_training_is_bit_identical(tmp_path, model, level):
    plain, dumped, _ = _train_twice(tmp_path, MODELS[model], "tensor", level)
    _assert_same_training(plain, dumped)


@pytest.mark.parametrize("model_cls", [MLP, ConvNet, SampleNet, TinyTransformer])
@pytest.mark.parametrize("level", ["L0", "L1", "mix", "L2"])
def test_test_models_train_bit_identically(tmp_path, model_cls, level):
    torch.manual_seed(0)
    plain = model_cls()
    torch.manual_seed(0)
    dumped = model_cls()
    plain_losses = train(plain, steps=2)
    debugger = PrecisionDebugger(config_path=write_config(tmp_path, "statistics", level), model=dumped)
    dumped_losses = train(dumped, debugger, steps=2)
    debugger.close()
    assert [x.hex() for x in plain_losses] == [x.hex() for x in dumped_losses]
    for (name, want), got in zip(plain.named_parameters(), dumped.parameters()):
        assert torch.equal(want, got), name


def test_input_grads_of_a_module_using_its_input_twice(tmp_path):
    """The module's backward entry holds the grad its two uses send to its input, nothing else."""
    torch.manual_seed(0)
    model = ResidualStack()
    x = torch.randn(8, 16)
    debugger = PrecisionDebugger(config_path=write_config(tmp_path, "tensor", "L0"), model=model)
    debugger.start()
    model(x).pow(2).mean().backward()
    debugger.stop()
    debugger.close()
    dump, _, _ = load_rank(tmp_path / "dump")
    files = tmp_path / "dump" / "step0" / "rank" / "dump_tensor_data"
    entry = dump["data"]["Module.blocks.0.norm.RMSNorm.backward.0"]

    block = model.blocks[0]
    h = (x * block.scale).detach().requires_grad_()
    normed = block.norm(h)
    rest = model.head(model.blocks[1:](h + block.lin(normed)))
    grad_of_normed = torch.autograd.grad(rest.pow(2).mean(), normed, retain_graph=True)[0]
    want_input_grad = torch.autograd.grad(normed, h, grad_of_normed)[0]
    torch.testing.assert_close(torch.load(files / entry["input"][0]["data_name"]), grad_of_normed)
    torch.testing.assert_close(torch.load(files / entry["output"][0]["data_name"]), want_input_grad)


def _bf16_llama():
    return tiny_llama().to(torch.bfloat16)


@pytest.mark.parametrize("level", ["L0", "L1", "mix", "L2"])
def test_bf16_training_with_md5_is_bit_identical(tmp_path, level):
    """bfloat16 parameters and activations, md5 summaries: the same bits with and without the debugger."""
    torch.manual_seed(0)
    plain_model = _bf16_llama()
    torch.manual_seed(0)
    dumped_model = _bf16_llama()
    plain = train_lm(plain_model)
    config = write_config(tmp_path, "statistics", level, section={"summary_mode": "md5"})
    debugger = PrecisionDebugger(config_path=config, model=dumped_model)
    dumped = train_lm(dumped_model, debugger)
    debugger.close()
    _assert_same_training(plain, dumped)
    dump, _, _ = load_rank(tmp_path / "dump", step=1)
    assert any("md5" in str(entry) for entry in dump["data"].values())


@pytest.mark.parametrize("level", ["mix", "L2"])   # mix runs the L0 and L1 hooks together
def test_bf16_tensor_mode_training_is_bit_identical(tmp_path, level):
    plain, dumped, _ = _train_twice(tmp_path, _bf16_llama, "tensor", level)
    _assert_same_training(plain, dumped)
