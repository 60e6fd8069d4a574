"""Tiny transformers models (built from configs, nothing downloaded) and the structural fault shapes people
make (an inserted call, a removed call, a swapped module, a changed scalar argument), dumped bf16 against fp32."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from compare_models import dump_transformer

VOCAB, HIDDEN = 96, 32


def tiny_qwen2():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    return Qwen2ForCausalLM(Qwen2Config(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=64, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32))


def tiny_phi3():
    from transformers import Phi3Config, Phi3ForCausalLM

    return Phi3ForCausalLM(Phi3Config(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
                                      pad_token_id=0, resid_pdrop=0.0, embd_pdrop=0.0, attention_dropout=0.0))


def tiny_mistral():
    from transformers import MistralConfig, MistralForCausalLM

    return MistralForCausalLM(MistralConfig(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=64,
                                            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                            max_position_embeddings=32))


def insert_call(model, layer=1):
    """An extra `out[0] * 1.01` at the end of the layer's attention forward."""
    attn = model.model.layers[layer].self_attn
    inner = attn.forward

    def forward(*args, **kwargs):
        out = inner(*args, **kwargs)
        return (out[0] * 1.01,) + tuple(out[1:])

    attn.forward = forward


class PlainRMSNorm(nn.Module):
    """An RMSNorm that forgot its weight: one multiplication fewer (the weight is 1 at initialisation)."""

    def __init__(self, norm):
        super().__init__()
        self.weight, self.eps = norm.weight, getattr(norm, "variance_epsilon", 1e-6)

    def forward(self, x):
        dtype = x.dtype
        x = x.to(torch.float32)
        return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)).to(dtype)


def remove_call(model, layer=1):
    """The layer's post-attention RMSNorm without its weight multiplication (one call fewer)."""
    block = model.model.layers[layer]
    norm = block.post_attention_layernorm
    plain = PlainRMSNorm(norm)
    norm.forward = plain.forward


def _activation(model, layer):
    """(the layer's MLP, the name of its activation attribute): `act_fn`, Phi3's `activation_fn`."""
    mlp = model.model.layers[layer].mlp
    return mlp, "act_fn" if hasattr(mlp, "act_fn") else "activation_fn"


def swap_module(model, layer=0):
    """The layer's MLP activation (SiLU) swapped for GELU with the tanh approximation."""
    setattr(*_activation(model, layer), nn.GELU(approximate="tanh"))


def change_scale(model, layer=1):
    """The layer's attention softmax scale 1 % off (sdpa's `scale` argument)."""
    model.model.layers[layer].self_attn.scaling *= 1.01


def gelu_approximate(model, layer=0):
    """The layer's activation is F.gelu with approximate='tanh' instead of the exact one (an argument)."""
    setattr(*_activation(model, layer), _Gelu("tanh"))


class _Gelu(nn.Module):
    def __init__(self, approximate):
        super().__init__()
        self.approximate = approximate

    def forward(self, x):
        return F.gelu(x, approximate=self.approximate)


def exact_gelu(model, layer=0):
    setattr(*_activation(model, layer), _Gelu("none"))


def dump_pair(root, build, npu_edit=None, bench_edit=None, task="statistics", level="mix"):
    """(NPU bf16 dump.json, bench fp32 dump.json) of one AdamW step of `build()`, each side edited."""
    npu = dump_transformer(f"{root}/npu", build, "bf16", task=task, level=level, edit=npu_edit)
    bench = dump_transformer(f"{root}/bench", build, "fp32", task=task, level=level, edit=bench_edit)
    return npu, bench
