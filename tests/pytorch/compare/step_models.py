"""Multi-step training of tiny transformers models under the debugger, for the cross-step advisor tests."""
import json
import os

import torch

VOCAB = 96


def tiny_qwen2():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    return Qwen2ForCausalLM(Qwen2Config(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
                                        attn_implementation="eager"))


def tiny_gpt_neox():
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    return GPTNeoXForCausalLM(GPTNeoXConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                                            num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=32,
                                            hidden_dropout=0.0, attention_dropout=0.0,
                                            attn_implementation="eager"))


def decay_groups(model):
    """Two param groups as transformers' Trainer makes them: weight decay for matrices, none for biases and norms."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    return [{"params": decay, "weight_decay": 0.01}, {"params": rest, "weight_decay": 0.0}]


def dump_steps(out_dir, build, dtype, make_optimizer, steps=4, level="mix", dumped_steps=(), fault=None, seed=0):
    """`steps` steps of `build()` in `dtype` under the debugger (statistics); `fault(optimizer, step)` runs before
    each optimizer step. Returns the dump root."""
    from msprobe.pytorch import PrecisionDebugger

    torch.manual_seed(seed)
    model = build().to(dtype).train()
    optimizer = make_optimizer(model)
    config = {"task": "statistics", "dump_path": out_dir, "rank": [], "step": list(dumped_steps), "level": level,
              "statistics": {"scope": [], "list": [], "data_mode": ["all"], "summary_mode": "statistics"}}
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as handle:
        json.dump(config, handle)
    debugger = PrecisionDebugger(config_path=os.path.join(out_dir, "config.json"), model=model)
    for step in range(steps):
        ids = torch.randint(1, VOCAB, (2, 8), generator=torch.Generator().manual_seed(100 + step))
        debugger.start()
        model(input_ids=ids, labels=ids).loss.backward()
        if fault is not None:
            fault(optimizer, step)
        optimizer.step()
        optimizer.zero_grad()
        debugger.stop()
        debugger.step()
    debugger.close()
    return out_dir
