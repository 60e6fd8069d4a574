"""bisect on real transformers causal LMs (Llama, Qwen2, Phi3, GPT-2 from tiny configs, bfloat16): upcasting an
embedding, a backbone called with input_ids or a never-called nn.ModuleList runs; a planted module that breaks in
low precision is named, a clean model names none."""
import os
import sys

import pytest
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "hf_targets.py")
sys.path.insert(0, HERE)

from hf_targets import build  # noqa: E402

from msprobe.pytorch.bisect import run_bisect, upcast_modules  # noqa: E402

IDS = torch.randint(0, 64, (2, 12), generator=torch.Generator().manual_seed(3))
PLANTS = {"llama": "model.layers.1.mlp.act_fn", "qwen2": "model.layers.0.mlp.act_fn",
          "phi3": "model.layers.1.mlp.activation_fn", "gpt2": "transformer.h.1.mlp.act"}


def _loss(model):
    with torch.no_grad():
        return model(input_ids=IDS, labels=IDS, use_cache=False)


@pytest.mark.parametrize("kind", sorted(PLANTS))
def test_upcasting_the_embedding_backbone_or_layer_list_runs_and_casts_back(kind):
    as_is = _loss(build(kind).bfloat16().eval())
    backbone = "transformer" if kind == "gpt2" else "model"
    embedding = f"{backbone}.wte" if kind == "gpt2" else f"{backbone}.embed_tokens"
    layers = f"{backbone}.h" if kind == "gpt2" else f"{backbone}.layers"
    for name in (embedding, backbone, layers):
        model = build(kind).bfloat16().eval()
        upcast_modules(model, frozenset([name]))
        seen = {}

        def record(_module, args, kwargs, seen=seen):
            seen.setdefault("layer_in", (args or list(kwargs.values()))[0].dtype)

        model.get_submodule(f"{layers}.0").register_forward_pre_hook(record, with_kwargs=True)
        out = _loss(model)  # crashed before: "expected m1 and m2 to have the same dtype"
        assert out.logits.dtype == torch.bfloat16 and torch.isfinite(out.loss)
        # inside an upcast list or backbone the layers see float32; after an upcast embedding, its own bf16
        assert seen["layer_in"] == (torch.bfloat16 if name == embedding else torch.float32), name
        assert model.get_submodule(f"{layers}.1").mlp.get_submodule(
            "c_proj" if kind == "gpt2" else "down_proj").weight.dtype == (torch.bfloat16 if name == embedding else torch.float32)
        if name == embedding and kind != "gpt2":
            # an embedding lookup in float32 cast back to bfloat16 is exact: the loss is the as-is loss, bit for bit
            assert out.loss.item() == as_is.loss.item()
        if name == embedding and kind == "gpt2":
            # GPT-2 ties lm_head to wte: one parameter, one dtype, so the head is upcast with it
            assert model.lm_head.weight.dtype == torch.float32 and model.lm_head.weight is model.transformer.wte.weight


@pytest.mark.parametrize("kind", sorted(PLANTS))
def test_bisect_names_the_planted_module_and_nothing_on_a_clean_model(kind, tmp_path, monkeypatch):
    monkeypatch.setenv("BISECT_MODEL", kind)
    monkeypatch.setenv("BISECT_PLANT", PLANTS[kind])
    result = run_bisect(SCRIPT, str(tmp_path / "planted"))
    assert result["culprits"] == [PLANTS[kind]]
    reference = result["metric_all_float32"]
    assert abs(result["metric_as_is"] - reference) > result["tolerance"]
    assert abs(result["metric_with_culprits_upcast"] - reference) <= result["tolerance"]
    assert len(result["trials"]) <= 40
    monkeypatch.setenv("BISECT_PLANT", "")
    clean = run_bisect(SCRIPT, str(tmp_path / "clean"))
    assert clean["culprits"] == [] and "does not explain" in clean["conclusion"]
