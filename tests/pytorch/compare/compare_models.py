"""Small real models and a helper that dumps one training step of them with msprobe's PrecisionDebugger."""
import json
import os

import torch
import torch.nn as nn
import torch.nn.functional as F


class GELU(nn.Module):
    """Same class name as torch's GELU so module rows keep their names; `broken` corrupts the output."""

    def __init__(self, broken=False):
        super().__init__()
        self.broken = broken

    def forward(self, x):
        y = F.gelu(x)
        if self.broken:
            y = y * 3.0 - 0.5
        return y


class MLP(nn.Module):
    def __init__(self, broken=False):
        super().__init__()
        self.l1 = nn.Linear(16, 32)
        self.act = GELU(broken)
        self.ln = nn.LayerNorm(32)
        self.l2 = nn.Linear(32, 4)

    def forward(self, x):
        return self.l2(self.ln(self.act(self.l1(x))))


class RenamedMLP(MLP):
    """MLP whose first layer is called `fc1`: same weights for the same seed, other module names."""

    def __init__(self, broken=False):
        nn.Module.__init__(self)
        self.fc1 = nn.Linear(16, 32)
        self.act = GELU(broken)
        self.ln = nn.LayerNorm(32)
        self.l2 = nn.Linear(32, 4)

    def forward(self, x):
        return self.l2(self.ln(self.act(self.fc1(x))))


def dump_mlp(out_dir, task="statistics", level="mix", dtype="fp32", seed=1234, data_seed=99, broken=False,
             steps=1, summary_mode="statistics", nan_input=False, extra_call=False, renamed=False):
    """Train `steps` steps of MLP (RenamedMLP if `renamed`) under the debugger; returns the step0 rank
    directory."""
    from msprobe.pytorch import PrecisionDebugger

    torch.manual_seed(seed)
    model = (RenamedMLP if renamed else MLP)(broken)
    if dtype == "bf16":
        model = model.to(torch.bfloat16)
    config = {"task": task, "dump_path": out_dir, "rank": [], "step": [], "level": level,
              task: {"scope": [], "list": [], "data_mode": ["all"], "summary_mode": summary_mode}}
    os.makedirs(out_dir, exist_ok=True)
    config_path = os.path.join(out_dir, "config.json")
    with open(config_path, "w") as handle:
        json.dump(config, handle)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    debugger = PrecisionDebugger(config_path=config_path, model=model)
    generator = torch.Generator().manual_seed(data_seed)
    for _ in range(steps):
        x = torch.randn(8, 16, generator=generator)
        if nan_input:
            x[0, 0] = float("nan")
        debugger.start()
        if dtype == "bf16":
            x = x.to(torch.bfloat16)
        if extra_call:  # one more gelu before the model: every later gelu call counter shifts by one
            F.gelu(torch.ones(3))
        loss = model(x).float().pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        debugger.stop()
        debugger.step()
    debugger.close()  # the writer is asynchronous
    step0 = os.path.join(out_dir, "step0")
    ranks = sorted(os.listdir(step0))
    return os.path.join(step0, ranks[0])


def dump_calls(out_dir, calls, task="statistics", level="L1"):
    """Dump one step in which `calls()` runs (plain torch calls, inputs made beforehand); returns the
    step0 rank directory."""
    from msprobe.pytorch import PrecisionDebugger

    config = {"task": task, "dump_path": out_dir, "rank": [], "step": [], "level": level,
              task: {"scope": [], "list": [], "data_mode": ["all"]}}
    os.makedirs(out_dir, exist_ok=True)
    config_path = os.path.join(out_dir, "config.json")
    with open(config_path, "w") as handle:
        json.dump(config, handle)
    debugger = PrecisionDebugger(config_path=config_path)
    debugger.start()
    calls()
    debugger.stop()
    debugger.step()
    debugger.close()
    step0 = os.path.join(out_dir, "step0")
    return os.path.join(step0, sorted(os.listdir(step0))[0])


def awkward_calls(side):
    """Calls whose data is awkward to compare; `side` ('npu' or 'bench') picks which values they see."""
    npu = side == "npu"
    generator = torch.Generator().manual_seed(5)
    inputs = {
        "ints": torch.tensor([1, 2, 3] if npu else [1, 2, 4]),
        "bools": torch.tensor([True, False] if npu else [True, True]),
        "dtype": torch.tensor([1, 2], dtype=torch.int32 if npu else torch.int64),
        "empty": torch.zeros(0, 4),
        "nan": torch.tensor([float("nan"), 1.0] if npu else [1.0, float("nan")]),
        "inf": torch.tensor([float("inf"), 1.0]),
        "scalar": torch.tensor(2.0 if npu else 1.5),
        "shape": torch.randn(2, 3, generator=generator) if npu else torch.randn(3, 2, generator=generator),
        "low": torch.randn(4, 4, generator=torch.Generator().manual_seed(6)),
    }
    if npu:
        inputs["low"] = inputs["low"].to(torch.bfloat16)

    def calls():
        torch.add(inputs["ints"], 1)
        torch.logical_not(inputs["bools"])
        torch.neg(inputs["dtype"])
        torch.relu(inputs["empty"])
        torch.abs(inputs["nan"])
        torch.abs(inputs["inf"])
        torch.exp(inputs["scalar"])
        torch.sigmoid(inputs["shape"])
        torch.tanh(inputs["low"])

    return calls


# -- models with one layer that can be broken by a scale factor (same calls on both sides) ------------

class Scaled(nn.Module):
    """Wraps a layer and multiplies its (first) output by `scale`: 1.0 on the bench side, 1.01 or 1.05 on
    the NPU side, so both sides make the same calls and only this multiplication's argument differs."""

    def __init__(self, inner, scale=1.0):
        super().__init__()
        self.inner, self.scale = inner, scale

    def forward(self, x):
        out = self.inner(x)
        if isinstance(out, tuple):
            return out[0] * self.scale
        return out * self.scale


class ConvNet(nn.Module):
    def __init__(self, scale=1.0):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = Scaled(nn.Conv2d(8, 8, 3, padding=1), scale)
        self.head = nn.Linear(8 * 4 * 4, 4)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.head(x.flatten(1))


class LstmNet(nn.Module):
    def __init__(self, scale=1.0):
        super().__init__()
        self.embed = nn.Linear(6, 16)
        self.lstm = Scaled(nn.LSTM(16, 16, batch_first=True), scale)
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        return self.head(self.lstm(torch.tanh(self.embed(x)))[:, -1])


class LinearNet(nn.Module):
    def __init__(self, scale=1.0):
        super().__init__()
        self.l1, self.l2, self.l3 = nn.Linear(16, 32), Scaled(nn.Linear(32, 32), scale), nn.Linear(32, 4)

    def forward(self, x):
        return self.l3(torch.relu(self.l2(torch.relu(self.l1(x)))))


_INPUTS = {"conv": (4, 3, 8, 8), "lstm": (4, 5, 6), "linear": (8, 16)}
_MODELS = {"conv": ConvNet, "lstm": LstmNet, "linear": LinearNet}


def tiny_llama(fault=None, layer=1):
    """A 2-layer transformers Llama built from a config (random weights, nothing downloaded) whose MLP
    activations are F.silu(x) * scale: 1.0 everywhere, 1 + fault in layer `layer`."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    model = LlamaForCausalLM(config)
    for index, block in enumerate(model.model.layers):
        block.mlp.act_fn = Scaled(nn.SiLU(), 1.0 + fault if fault and index == layer else 1.0)
    return model


def dump_model(out_dir, kind, task="tensor", dtype="fp32", fault=None, level="mix", seed=0):
    """One training step of model `kind` ('conv', 'lstm', 'linear' or 'llama') under the debugger, its
    scaled layer multiplied by 1 + fault; returns the dump.json path."""
    from msprobe.pytorch import PrecisionDebugger

    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed + 1)
    if kind == "llama":
        model = tiny_llama(fault)
        ids = torch.randint(0, 128, (2, 8), generator=generator)
        batch = {"input_ids": ids, "labels": ids}
    else:
        model = _MODELS[kind](1.0 + fault if fault else 1.0)
        batch = torch.randn(*_INPUTS[kind], generator=generator)
    if dtype == "bf16":
        model = model.to(torch.bfloat16)
        batch = batch if kind == "llama" else batch.to(torch.bfloat16)
    config = {"task": task, "dump_path": out_dir, "rank": [], "step": [], "level": level,
              task: {"scope": [], "list": [], "data_mode": ["all"], "summary_mode": "statistics"}}
    os.makedirs(out_dir, exist_ok=True)
    config_path = os.path.join(out_dir, "config.json")
    with open(config_path, "w") as handle:
        json.dump(config, handle)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    debugger = PrecisionDebugger(config_path=config_path, model=model)
    debugger.start()
    if kind == "llama":
        loss = model(**batch).loss
    else:
        loss = model(batch).float().pow(2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    debugger.stop()
    debugger.step()
    debugger.close()
    step0 = os.path.join(out_dir, "step0")
    return os.path.join(step0, sorted(os.listdir(step0))[0], "dump.json")


def as_statistics_dump(dump_json, out_path):
    """The same dump as a statistics dump (tensor dumps record the statistics too): task and data_name
    dropped, so the compare runs in statistics mode on exactly the same run."""
    with open(dump_json) as handle:
        dump = json.load(handle)
    dump["task"] = "statistics"
    text = json.dumps(dump).replace('"data_name"', '"_unused_data_name"')
    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    with open(out_path, "w") as handle:
        handle.write(text)
    return out_path


def fault_entry(dump_json, factor):
    """The forward entry whose second argument is the scale `factor` (the faulty multiplication)."""
    with open(dump_json) as handle:
        data = json.load(handle)["data"]
    for entry, body in data.items():
        args = body.get("input_args") or []
        if ".forward" in entry and len(args) > 1 and isinstance(args[1], dict) and args[1].get("value") == factor:
            return entry
    raise AssertionError(f"no call multiplies by {factor}")


# -- transformers models of the diagnosis benchmark (tiny configs, eager attention, AdamW) ----------

def tiny_gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    return GPT2LMHeadModel(GPT2Config(vocab_size=96, n_positions=32, n_embd=32, n_layer=2, n_head=4, resid_pdrop=0.0,
                                      embd_pdrop=0.0, attn_pdrop=0.0, attn_implementation="eager",
                                      bos_token_id=0, eos_token_id=0))


def tiny_eager_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    return LlamaForCausalLM(LlamaConfig(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
                                        attn_implementation="eager"))


def tiny_bert():
    from transformers import BertConfig, BertForMaskedLM

    return BertForMaskedLM(BertConfig(vocab_size=96, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                      intermediate_size=64, max_position_embeddings=32, hidden_dropout_prob=0.0,
                                      attention_probs_dropout_prob=0.0, attn_implementation="eager"))


def tiny_t5():
    from transformers import T5Config, T5ForConditionalGeneration

    return T5ForConditionalGeneration(T5Config(vocab_size=96, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
                                               dropout_rate=0.0, decoder_start_token_id=0,
                                               attn_implementation="eager"))


def tiny_mixtral():
    from transformers import MixtralConfig, MixtralForCausalLM

    return MixtralForCausalLM(MixtralConfig(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                            num_attention_heads=4, num_key_value_heads=2, num_local_experts=4,
                                            num_experts_per_tok=2, max_position_embeddings=32,
                                            attn_implementation="eager"))


def dump_transformer(out_dir, build, dtype="fp32", task="tensor", level="mix", edit=None, lr=1e-3, eps=1e-8,
                     seed=0, steps=1, ids_seed=None):
    """`steps` AdamW steps of the transformers model `build()` (edited by `edit(model)` before the cast
    to `dtype`) under the debugger, on token ids drawn with `ids_seed` (default seed + 1); returns the
    step0 dump.json path."""
    from msprobe.pytorch import PrecisionDebugger

    torch.manual_seed(seed)
    model = build()
    if edit is not None:
        edit(model)
    model = model.to({"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype]).train()
    summary = "md5" if task == "md5" else "statistics"
    task = "statistics" if task == "md5" else task
    config = {"task": task, "dump_path": out_dir, "rank": [], "step": [], "level": level,
              task: {"scope": [], "list": [], "data_mode": ["all"], "summary_mode": summary}}
    os.makedirs(out_dir, exist_ok=True)
    config_path = os.path.join(out_dir, "config.json")
    with open(config_path, "w") as handle:
        json.dump(config, handle)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, eps=eps)
    debugger = PrecisionDebugger(config_path=config_path, model=model)
    ids = torch.randint(1, 96, (2, 8), generator=torch.Generator().manual_seed(seed + 1 if ids_seed is None else ids_seed))
    for _ in range(steps):
        debugger.start()
        model(input_ids=ids, labels=ids).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        debugger.stop()
        debugger.step()
    debugger.close()
    step0 = os.path.join(out_dir, "step0")
    return os.path.join(step0, sorted(os.listdir(step0))[0], "dump.json")
