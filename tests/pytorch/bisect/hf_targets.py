"""bisect_target() for real transformers causal LMs built from tiny configs (no downloads), in bfloat16. Environment:
BISECT_MODEL (llama, qwen2, phi3, gpt2) and BISECT_PLANT, a module name whose forward is made to break in low
precision (its input goes through (x + 512) - 512 first: exact enough in float32, two bits left in bfloat16)."""
import os

import torch
import transformers
from torch import nn

VOCAB = 64


class Lossy(nn.Module):
    """Wraps a module; its own code adds and removes 512 before calling it."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x, *args, **kwargs):
        return self.inner((x + 512.0) - 512.0, *args, **kwargs)


def build(kind):
    torch.manual_seed(0)
    common = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, initializer_range=0.2)
    if kind == "gpt2":
        config = transformers.GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=32,
                                         initializer_range=0.2, bos_token_id=0, eos_token_id=0)
        return transformers.GPT2LMHeadModel(config)
    config_class, model_class = {"llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM),
                                 "qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM),
                                 "phi3": (transformers.Phi3Config, transformers.Phi3ForCausalLM)}[kind]
    config = config_class(intermediate_size=64, num_key_value_heads=2, max_position_embeddings=32, pad_token_id=0,
                          bos_token_id=0, eos_token_id=0, **common)
    return model_class(config)


def bisect_target():
    model = build(os.environ["BISECT_MODEL"])
    plant = os.environ.get("BISECT_PLANT")
    if plant:
        parent, _, child = plant.rpartition(".")
        holder = model.get_submodule(parent)
        setattr(holder, child, Lossy(getattr(holder, child)))
    model = model.bfloat16().eval()
    ids = torch.randint(0, VOCAB, (4, 16), generator=torch.Generator().manual_seed(1))

    def evaluate():
        with torch.no_grad():
            return float(model(input_ids=ids, labels=ids, use_cache=False).loss)

    return model, evaluate
