"""Tiny HuggingFace models built from configs with random weights (no downloads), and a residual
block whose RMSNorm uses its input twice (the minimal case where regrouped gradient sums show)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB = 128


def tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    return LlamaForCausalLM(config)


def tiny_gpt2(dropout=0.1):
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=64,
                        resid_pdrop=dropout, embd_pdrop=dropout, attn_pdrop=dropout)
    return GPT2LMHeadModel(config)


class RMSNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, h):
        return self.weight * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6))


class ScaledResidual(nn.Module):
    """h = x * s; h = h + lin(norm(h)): `h` has three uses, two of them inside `norm`."""

    def __init__(self, dim=16):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(dim))
        self.norm = RMSNorm(dim)
        self.lin = nn.Linear(dim, dim)

    def forward(self, x):
        h = x * self.scale
        return h + self.lin(self.norm(h))


class FunctionalResidual(nn.Module):
    """The same shape through composite functions (F.rms_norm, F.normalize use their input twice
    inside one recorded API call, which is what L1 sees)."""

    def __init__(self, dim=16):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(dim))
        self.weight = nn.Parameter(torch.ones(dim))
        self.lin = nn.Linear(dim, dim)

    def forward(self, x):
        h = x * self.scale
        return h + self.lin(F.rms_norm(h, (h.shape[-1],), self.weight)) + self.lin(F.normalize(h, dim=-1))


class ResidualStack(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.blocks = nn.Sequential(ScaledResidual(dim), ScaledResidual(dim), FunctionalResidual(dim))
        self.head = nn.Linear(dim, 4)

    def forward(self, x):
        return self.head(self.blocks(x))


def token_batch(seed, batch=2, length=12):
    return torch.randint(0, VOCAB, (batch, length), generator=torch.Generator().manual_seed(seed))


def train_lm(model, debugger=None, steps=2, seed=0):
    """AdamW steps of a causal LM (or the residual stack on float inputs): (losses, grads per step)."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model.train()
    losses, grads = [], []
    for step in range(steps):
        torch.manual_seed(100 + step)  # dropout draws the same masks with and without the debugger
        if debugger:
            debugger.start()
        if isinstance(model, ResidualStack):
            x = torch.randn(8, 16, generator=torch.Generator().manual_seed(seed + step))
            loss = model(x).pow(2).mean()
        else:
            ids = token_batch(seed + step)
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        grads.append({name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None})
        opt.step()
        opt.zero_grad()
        if debugger:
            debugger.stop()
            debugger.step()
        losses.append(loss.detach().clone())
    return losses, grads
