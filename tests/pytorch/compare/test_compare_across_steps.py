"""Step N's parameter differences judged against step N-1's update (issue 40 finding 4): after one AdamW or SGD
step a clean bf16 port's weights differ from fp32's (Adam turns gradients that are zero up to rounding into ±lr
steps), so compare names no suspect at steps 1..3 when step N-1 is dumped and passes; an optimizer fault planted at
step N (another weight decay for a param group, another lr for one parameter) is named at step N and the parameter
it changed at step N+1; with step N-1 not dumped the advisor says how to check."""
import logging
import os

import pytest
import torch

from compare_models import tiny_gpt2
from msprobe.core.compare import CompareOptions, compare_dumps
from msprobe.core.compare.across_steps import previous_dumps, step_of
from step_models import decay_groups, dump_steps, tiny_gpt_neox, tiny_qwen2

PAIRS = {
    # architecture, optimizer (transformers 5's default AdamW is fused), level
    "gpt2_fused_adamw": (tiny_gpt2, lambda m: torch.optim.AdamW(decay_groups(m), lr=1e-3, fused=True), "mix"),
    "qwen2_foreach_adamw_L1": (tiny_qwen2, lambda m: torch.optim.AdamW(m.parameters(), lr=1e-3, foreach=True), "L1"),
    "neox_sgd": (tiny_gpt_neox, lambda m: torch.optim.SGD(m.parameters(), lr=1e-2, momentum=0.9), "mix"),
}


@pytest.fixture(autouse=True)
def _quiet():
    log = logging.getLogger("msprobe")
    level = log.level
    log.setLevel(logging.WARNING)
    yield
    log.setLevel(level)


def _advisor_texts(npu_root, bench_root, out_dir):
    """{step: advisor text} of compare_dumps over the two dump roots."""
    outcomes = compare_dumps(npu_root, bench_root, out_dir, CompareOptions(progress=False, processes=1))
    texts = {}
    for outcome in outcomes:
        step = int(os.path.basename(outcome.advisor_path).split("_step")[1].split("_")[0])
        with open(outcome.advisor_path, encoding="utf-8") as handle:
            texts[step] = handle.read()
    return texts


def _suspect(text):
    return text.splitlines()[1].split(": ", 1)[1]


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_clean_bf16_port_has_no_suspect_at_any_step(tmp_path, pair):
    build, optimizer, level = PAIRS[pair]
    npu = dump_steps(str(tmp_path / "bf16"), build, torch.bfloat16, optimizer, level=level)
    bench = dump_steps(str(tmp_path / "fp32"), build, torch.float32, optimizer, level=level)
    texts = _advisor_texts(npu, bench, str(tmp_path / "out"))
    assert sorted(texts) == [0, 1, 2, 3]
    assert {step: _suspect(text) for step, text in texts.items()} == {0: "N/A", 1: "N/A", 2: "N/A", 3: "N/A"}
    # the weights do differ after the first update: each later step says why that is no suspect
    explained = [step for step in (1, 2, 3) if f"presumed step {step - 1}'s update's consequences" in texts[step]]
    assert explained, texts
    if pair == "gpt2_fused_adamw":  # graph compare judges a step folder the same way
        from msprobe.visualization import graph_verdict

        verdict = graph_verdict(os.path.join(npu, "step1", "rank"), os.path.join(bench, "step1", "rank"))
        assert (verdict.worst_node, verdict.first_node, verdict.suspect) == (None, None, None)


def test_without_the_previous_step_the_advisor_says_how_to_check(tmp_path):
    build, optimizer, _ = PAIRS["gpt2_fused_adamw"]
    npu = dump_steps(str(tmp_path / "bf16"), build, torch.bfloat16, optimizer, steps=2, dumped_steps=[1])
    bench = dump_steps(str(tmp_path / "fp32"), build, torch.float32, optimizer, steps=2, dumped_steps=[1])
    text = _advisor_texts(npu, bench, str(tmp_path / "out"))[1]
    assert ".parameters." in _suspect(text)  # Adam's ±lr step of the attention bias, not judged without step 0
    assert "may differ through step 0's update" in text and "[0, 1]" in text


def _wrong_weight_decay(optimizer, step):
    if step >= 2:  # from step 2 on, the matrices' group decays 10x
        optimizer.param_groups[0]["weight_decay"] = 0.1


def _scaled_lr_of_one_parameter(optimizer, step):
    if step == 1:
        optimizer.param_groups[1]["lr"] = 2e-3


def _own_group_for_the_first_bias(model):
    params = list(model.parameters())
    return torch.optim.AdamW([{"params": params[:3] + params[4:]}, {"params": [params[3]]}], lr=1e-3)


@pytest.mark.parametrize("case", ["fused_weight_decay", "for_loop_lr"])
def test_an_optimizer_fault_at_step_n_is_named_at_step_n_and_its_parameter_at_n_plus_1(tmp_path, case):
    if case == "fused_weight_decay":
        build, optimizer, _ = PAIRS["gpt2_fused_adamw"]
        fault, step, named = _wrong_weight_decay, 2, "Torch._fused_adamw_.0.forward.input.weight_decay"
    else:
        build, optimizer = tiny_qwen2, _own_group_for_the_first_bias
        fault, step, named = _scaled_lr_of_one_parameter, 1, None
    npu = dump_steps(str(tmp_path / "faulty"), build, torch.bfloat16, optimizer, fault=fault)
    bench = dump_steps(str(tmp_path / "bench"), build, torch.float32, optimizer)
    texts = _advisor_texts(npu, bench, str(tmp_path / "out"))
    assert [_suspect(texts[s]) for s in range(step)] == ["N/A"] * step
    suspect = _suspect(texts[step])
    if named is not None:
        assert suspect == named
    else:  # the for-loop AdamW: the call of the parameter's own group whose step size differs
        assert suspect.startswith("Tensor.") and ("differing argument" in texts[step]
                                                  or "is called with another argument" in texts[step])
    # named as the call made with another argument: by the structural pass (its argument row) or as the cause
    assert "is made with other float arguments" in texts[step] or "is called with another argument" in texts[step]
    following = texts[step + 1]
    assert _suspect(following) != "N/A"
    assert f"step {step}'s update does not explain it" in following


def test_step_paths():
    root = os.path.join("a", "dump")
    assert step_of(os.path.join(root, "step3", "rank0", "dump.json")) == 3
    assert step_of(os.path.join(root, "rank0", "dump.json")) is None
    assert previous_dumps(os.path.join(root, "step0", "rank", "dump.json"),
                          os.path.join(root, "step0", "rank", "dump.json")) is None
