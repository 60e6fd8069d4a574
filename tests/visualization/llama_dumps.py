"""A small transformers Llama (built from a config, nothing downloaded) dumped for one training step under
PrecisionDebugger: bf16 or fp32, optionally with one RMSNorm weight scaled (the injected fault)."""
import json
import os

import torch


def tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    torch.manual_seed(0)
    return LlamaForCausalLM(config)


def dump_llama(directory, dtype="fp32", norm_scale=None, task="statistics"):
    """One AdamW step of the tiny Llama; `norm_scale` multiplies layer 1's post_attention_layernorm
    weight. Returns the rank directory (holding dump.json, construct.json, stack.json)."""
    from msprobe.pytorch import PrecisionDebugger

    model = tiny_llama()
    if norm_scale is not None:
        with torch.no_grad():
            model.model.layers[1].post_attention_layernorm.weight.mul_(norm_scale)
    if dtype == "bf16":
        model = model.to(torch.bfloat16)
    ids = torch.randint(0, 128, (2, 8), generator=torch.Generator().manual_seed(1))
    os.makedirs(directory, exist_ok=True)
    config = {"task": task, "dump_path": os.path.join(directory, "dump"), "level": "mix",
              task: {"summary_mode": "statistics"} if task == "statistics" else {}}
    config_path = os.path.join(directory, "config.json")
    with open(config_path, "w") as handle:
        json.dump(config, handle)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    debugger = PrecisionDebugger(config_path=config_path, model=model)
    debugger.start()
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    optimizer.step()
    debugger.stop()
    debugger.step()
    debugger.close()
    return os.path.join(directory, "dump", "step0", "rank")
