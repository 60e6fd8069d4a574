"""torch.optim's fused and foreach steps at L1 and mix (issue 39 item 5): transformers 5's default AdamW(fused=True)
is one `Torch._fused_adamw_` call a step whose list arguments hold every parameter, gradient and moment; each is
recorded per parameter (`input.<position>.<index>`), with the statistics of the tensor before the step."""
import json

import pytest
import torch

from msprobe.pytorch import PrecisionDebugger
from pt_dump_helpers import load_rank, write_config


def tiny_qwen2():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    return Qwen2ForCausalLM(Qwen2Config(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
                                        attn_implementation="eager"))


def _train(tmp_path, optimizer_of, level, steps=2, seed=0):
    """`steps` steps of a tiny Qwen2 under the debugger; returns (dump root, parameters, [snapshots per step]):
    each snapshot holds the parameters, gradients and optimizer state as the step's optimizer call received them."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    model = tiny_qwen2().train()
    params = list(model.parameters())
    optimizer = optimizer_of(params)
    snapshots = []

    def before_step(opt, args, kwargs):
        snapshots.append({"params": [p.detach().clone() for p in params],
                          "grads": [p.grad.detach().clone() for p in params],
                          "exp_avg": [opt.state[p]["exp_avg"].clone() if "exp_avg" in opt.state[p] else None
                                      for p in params]})

    handle = optimizer.register_step_pre_hook(before_step)
    debugger = PrecisionDebugger(config_path=write_config(tmp_path, "statistics", level), model=model)
    for _ in range(steps):
        debugger.start()
        _train_step(model, optimizer, seed)
        debugger.stop()
        debugger.step()
    debugger.close()
    handle.remove()
    return tmp_path / "dump", params, snapshots


def _train_step(model, optimizer, seed):
    ids = torch.randint(1, 96, (2, 8), generator=torch.Generator().manual_seed(seed + 1))
    model(input_ids=ids, labels=ids).loss.backward()
    optimizer.step()
    optimizer.zero_grad()


def _stats_match(descriptor, tensor):
    assert descriptor["shape"] == list(tensor.shape)
    assert descriptor["Max"] == pytest.approx(tensor.max().item(), abs=1e-7)
    assert descriptor["Min"] == pytest.approx(tensor.min().item(), abs=1e-7)
    assert descriptor["Norm"] == pytest.approx(tensor.norm().item(), rel=1e-5, abs=1e-9)


@pytest.mark.parametrize("level", ["L1", "mix"])
def test_fused_adamw_is_recorded_per_parameter(tmp_path, level):
    root, params, snapshots = _train(tmp_path, lambda ps: torch.optim.AdamW(ps, lr=1e-3, weight_decay=0.02,
                                                                          fused=True), level)
    for step in range(2):
        data = load_rank(root, step)[0]["data"]
        entry = data["Torch._fused_adamw_.0.forward"]
        params_arg, grads_arg, exp_avgs_arg = entry["input_args"][:3]
        assert len(params_arg) == len(grads_arg) == len(exp_avgs_arg) == len(params)
        for index in (0, 3, len(params) - 1):
            _stats_match(params_arg[index], snapshots[step]["params"][index])
            _stats_match(grads_arg[index], snapshots[step]["grads"][index])
            moment = snapshots[step]["exp_avg"][index]  # created by the first step
            _stats_match(exp_avgs_arg[index], torch.zeros_like(params[index]) if moment is None else moment)
        kwargs = entry["input_kwargs"]
        assert kwargs["lr"] == {"type": "float", "value": 1e-3}
        assert kwargs["weight_decay"] == {"type": "float", "value": 0.02}
    if level == "mix":
        construct = load_rank(root, 1)[2]
        assert construct["Torch._fused_adamw_.0.forward"] == "optimizer"


def test_foreach_adamw_calls_and_their_names_are_stable_across_steps_and_runs(tmp_path):
    def optimizer_of(ps):
        return torch.optim.AdamW(ps, lr=1e-3, foreach=True)

    root, params, snapshots = _train(tmp_path / "a", optimizer_of, "L1", steps=3)
    again, _, _ = _train(tmp_path / "b", optimizer_of, "L1", steps=3)

    def optimizer_calls(dump_root, step):
        names = list(load_rank(dump_root, step)[0]["data"])
        last_backward = max(i for i, name in enumerate(names) if name.endswith(".backward"))
        return names[last_backward + 1:]

    calls = optimizer_calls(root, 1)
    assert "Torch._foreach_lerp_.0.forward" in calls and "Torch._foreach_addcdiv_.0.forward" in calls
    assert optimizer_calls(root, 2) == calls  # step 0 adds the state's zeros_like
    assert [optimizer_calls(again, step) for step in range(3)] == [optimizer_calls(root, step) for step in range(3)]
    data = load_rank(root, 1)[0]["data"]
    update = data["Torch._foreach_addcdiv_.0.forward"]
    assert len(update["input_args"][0]) == len(params)
    # the update's first list is the parameters (after weight decay, before the update)
    decay = data["Torch._foreach_mul_.0.forward"]
    assert decay["input_args"][1] == {"type": "float", "value": pytest.approx(1 - 1e-3 * 1e-2)}
    for index in (0, len(params) - 1):
        _stats_match(decay["input_args"][0][index], snapshots[1]["params"][index])
        _stats_match(data["Torch._foreach_lerp_.0.forward"]["input_args"][1][index], snapshots[1]["grads"][index])


def test_fused_sgd_is_recorded_and_training_is_unchanged(tmp_path):
    def optimizer_of(ps):
        return torch.optim.SGD(ps, lr=1e-2, momentum=0.9, fused=True)

    root, params, snapshots = _train(tmp_path, optimizer_of, "L1", steps=2)
    entry = load_rank(root, 1)[0]["data"]["Torch._fused_sgd_.0.forward"]
    assert len(entry["input_args"][0]) == len(params)
    _stats_match(entry["input_args"][1][2], snapshots[1]["grads"][2])
    # the same training without the debugger: bit for bit
    torch.manual_seed(0)
    model = tiny_qwen2().train()
    optimizer = optimizer_of(list(model.parameters()))
    for _ in range(2):
        _train_step(model, optimizer, 0)
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), params))


def test_a_model_without_optimizer_calls_records_the_same_entries(tmp_path):
    """The optimizer names only add entries where torch.optim calls them: a plain SGD's step is still its
    Tensor methods, and the forward's calls are unchanged."""
    root, _, _ = _train(tmp_path, lambda ps: torch.optim.SGD(ps, lr=1e-2, foreach=False), "L1", steps=1)
    names = list(load_rank(root, 0)[0]["data"])
    assert not [name for name in names if "_foreach_" in name or "_fused_" in name]
    assert "Tensor.add_.0.forward" in names
    json.dumps(names)
