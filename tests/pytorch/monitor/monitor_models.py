"""Small real models and training loops for the monitor tests (random weights, no downloads)."""
import json
import os

import torch
import torch.nn as nn

VOCAB = 96


def mlp(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 1))


def tiny_gpt2(seed=0):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    config = GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=32,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    return GPT2LMHeadModel(config)


def tiny_llama(seed=0):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32)
    return LlamaForCausalLM(config)


def train_mlp(model, optimizer, steps, seed=0, before_step=None, batch=32):
    """Regression y = sum(x) with minibatches; `before_step(step, model)` may change gradients."""
    gen = torch.Generator().manual_seed(seed)
    x_all = torch.randn(256, 8, generator=gen)
    y_all = x_all.sum(1, keepdim=True)
    losses = []
    for step in range(steps):
        idx = torch.randint(0, 256, (batch,), generator=gen)
        loss = (model(x_all[idx]) - y_all[idx]).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        if before_step is not None:
            before_step(step, model)
        optimizer.step()
        losses.append(loss.item())
    return losses


def train_lm(model, optimizer, steps, seed=0, before_step=None):
    gen = torch.Generator().manual_seed(seed)
    losses = []
    for step in range(steps):
        ids = torch.randint(0, VOCAB, (4, 16), generator=gen)
        loss = model(input_ids=ids, labels=ids).loss
        optimizer.zero_grad()
        loss.backward()
        if before_step is not None:
            before_step(step, model)
        optimizer.step()
        losses.append(loss.item())
    return losses


def write_config(directory, **keys):
    path = os.path.join(str(directory), "monitor_config.json")
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(keys, handle)
    return path


def read_csv(path):
    import csv

    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    return rows[0], rows[1:]
