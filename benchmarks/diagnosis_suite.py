"""Diagnosis benchmark: how often does compare's advisor cry wolf on clean runs, and find the fault on faulty ones?

usage: python benchmarks/diagnosis_suite.py [--quick] [--models gpt2,llama] [--faults param_scale,...]
                                            [--seeds 1] [--steps 2] [--optimizer adamw] [--json-only] [--keep DIR]
                                            [--tools advisor,run_ut,grad_compare,trainer_mon,free_benchmark]
                                            [--mindspore]

Every entry of MODELS (a `transformers` model built from a tiny config, nothing downloaded) is trained
`--steps` AdamW steps (or `--optimizer`'s) under PrecisionDebugger (task tensor, level mix) on the two sides of each
pair; step N >= 1 is judged against step N-1's update (msprobe.core.compare.across_steps):

  clean pairs    bf16 vs fp32 (a pure bf16 port: weights, activations and AdamW state in bf16), fp16 vs
                 fp32 (autocast to fp16 with fp32 weights and optimizer and a static loss scale of 4096
                 on both sides, as fp16 is trained), fp32 with 1
                 thread vs fp32 with 2 threads: every step is scored;
                 any suspect is a false suspect.
  faulty pairs   one FAULTS entry injected in one place of the faulty side (the layer chosen by the seed)
                 on its `base` precision pair; step 0 is scored. The fault's site is a module of the
                 model; the debugger's own record of which calls ran inside that module's forward (its
                 "span") gives the names that count as a hit: the module's rows, its parameters and every
                 API call made inside it. Faults that are not a module (optimizer, data loader) have their
                 own `hit` rule.

Each tensor dump is also scored as a statistics dump (the same run with the tensor files dropped) and
at level L1 (the same run with the Module rows dropped), so each pair gives four verdicts: statistics
and tensor modes at levels mix and L1. Scored per tool and mode: false suspects on clean pairs, hit
rate on faulty pairs, and when missed, the rank of the first hit row among the rows beyond tolerance.
Graph compare (`msprobe.visualization.graph_verdict`, the same dumps written as four dump directories)
is scored the same way on its worst node and its "first" badge, with their agreement with the advisor.

The other tools (run_ut, grad compare, TrainerMon alerts, free_benchmark) are TOOLS entries of
diagnosis_tools.py, each with the faults it claims to find and its hit rule (`--tools`); the MindSpore
nets are diagnosis_mindspore.py (`--mindspore`: its pairs scored for the advisor).

The structural faults (issue 40: insert_call, remove_call, swap_module, scalar_argument, op_dtype) change
what the faulty side calls, or an argument of a call, rather than a value; `shape_table` scores them per
shape. To add a model: a MODELS entry name -> (builder(seed) -> torch model, batch(seed) -> kwargs with labels).
To add a fault: a FAULTS entry name -> Fault(install, base, hit): `install(model, side, rng)` changes the
model on both sides (side 'faulty' or 'bench'; both make the same calls unless the fault is structural) and
returns the module whose
span is the fault's site (or None with a `hit(suspect)` rule of its own); `base` is the precision pair.
"""
import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Callable, Optional

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from msprobe.core.compare import CompareOptions, compare_tables  # noqa: E402
from msprobe.core.compare.across_steps import judge_across, judge_previous  # noqa: E402
from diagnosis_variants import graph_dirs, variants  # noqa: E402

VOCAB, HIDDEN, LAYERS, SEQ, BATCH = 96, 32, 2, 8, 2
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


# -- models ------------------------------------------------------------------------------------------

def _ids(seed, vocab=VOCAB):
    generator = torch.Generator().manual_seed(1000 + seed)
    return torch.randint(1, vocab, (BATCH, SEQ), generator=generator)


def _causal_batch(seed):
    ids = _ids(seed)
    return {"input_ids": ids, "labels": ids}


def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    return GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_positions=32, n_embd=HIDDEN, n_layer=LAYERS, n_head=4,
                                      resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                                      attn_implementation="eager"))


def llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    return LlamaForCausalLM(LlamaConfig(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=64,
                                        num_hidden_layers=LAYERS, num_attention_heads=4, num_key_value_heads=2,
                                        max_position_embeddings=32, attn_implementation="eager"))


def bert():
    from transformers import BertConfig, BertForMaskedLM

    return BertForMaskedLM(BertConfig(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                                      num_attention_heads=4, intermediate_size=64, max_position_embeddings=32,
                                      hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                      attn_implementation="eager"))


def t5():
    from transformers import T5Config, T5ForConditionalGeneration

    return T5ForConditionalGeneration(T5Config(vocab_size=VOCAB, d_model=HIDDEN, d_kv=8, d_ff=64, num_layers=LAYERS,
                                               num_heads=4, dropout_rate=0.0, decoder_start_token_id=0,
                                               attn_implementation="eager"))


def mixtral():
    from transformers import MixtralConfig, MixtralForCausalLM

    return MixtralForCausalLM(MixtralConfig(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=64,
                                            num_hidden_layers=LAYERS, num_attention_heads=4, num_key_value_heads=2,
                                            num_local_experts=4, num_experts_per_tok=2, max_position_embeddings=32,
                                            attn_implementation="eager"))


def _decoder(config_name, model_name, **fields):
    """A transformers decoder built from its config: the suite's common sizes, then the model's own `fields`."""
    import transformers

    sizes = dict(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=64, num_hidden_layers=LAYERS,
                 num_attention_heads=4, max_position_embeddings=32)
    return getattr(transformers, model_name)(getattr(transformers, config_name)(**sizes, **fields))


def qwen2():
    return _decoder("Qwen2Config", "Qwen2ForCausalLM", num_key_value_heads=2)


def phi3():
    return _decoder("Phi3Config", "Phi3ForCausalLM", num_key_value_heads=2, pad_token_id=0, resid_pdrop=0.0,
                    embd_pdrop=0.0, attention_dropout=0.0)


def mistral():
    return _decoder("MistralConfig", "MistralForCausalLM", num_key_value_heads=2)


def gpt_neox():
    return _decoder("GPTNeoXConfig", "GPTNeoXForCausalLM", hidden_dropout=0.0, attention_dropout=0.0,
                    attn_implementation="eager")


def _t5_batch(seed):
    ids = _ids(seed)
    return {"input_ids": ids, "labels": ids.flip(1)}


MODELS = {
    # name -> (builder, batch(seed), blocks(model) -> the list of repeated layers faults are placed in)
    "gpt2": (gpt2, _causal_batch, lambda m: m.transformer.h),
    "llama": (llama, _causal_batch, lambda m: m.model.layers),
    "bert": (bert, _causal_batch, lambda m: m.bert.encoder.layer),
    "t5": (t5, _t5_batch, lambda m: m.encoder.block),
    "mixtral": (mixtral, _causal_batch, lambda m: m.model.layers),
    # new in issue 40 (attention through sdpa, transformers' default): structural fault shapes
    "qwen2": (qwen2, _causal_batch, lambda m: m.model.layers),
    "phi3": (phi3, _causal_batch, lambda m: m.model.layers),
    "mistral": (mistral, _causal_batch, lambda m: m.model.layers),
    "gpt_neox": (gpt_neox, _causal_batch, lambda m: m.gpt_neox.layers),
}

# --optimizer: what each side's training steps with (the faults' eps applies to the AdamW variants)
OPTIMIZERS = {
    "adamw": lambda params, eps: torch.optim.AdamW(params, lr=1e-3, eps=eps),
    "adamw_fused": lambda params, eps: torch.optim.AdamW(params, lr=1e-3, eps=eps, fused=True),
    "adamw_foreach": lambda params, eps: torch.optim.AdamW(params, lr=1e-3, eps=eps, foreach=True),
    "sgd": lambda params, eps: torch.optim.SGD(params, lr=1e-2, momentum=0.9),
}
OPTIMIZER = ["adamw"]


# -- faults --------------------------------------------------------------------------------------------

class Rounded(nn.Module):
    """Runs `inner` and rounds its output through `dtype` (float32 on the bench side: a no-op with the
    same calls): a norm or softmax whose result passed through low precision."""

    def __init__(self, inner, dtype):
        super().__init__()
        self.inner = inner
        self.probe = torch.zeros((), dtype=dtype)  # not a buffer: model.to() leaves its dtype alone

    def forward(self, *args, **kwargs):
        out = self.inner(*args, **kwargs)
        first = out[0] if isinstance(out, tuple) else out
        first = first.type_as(self.probe).type_as(first)  # type_as is a dumped API (Tensor.to is not)
        return (first,) + tuple(out[1:]) if isinstance(out, tuple) else first


class Residual(nn.Module):
    """A block whose residual connection is scaled: output + alpha * input (alpha 0 on the bench side,
    1 for a doubled residual, -1 for a dropped one)."""

    def __init__(self, inner, alpha):
        super().__init__()
        self.inner, self.alpha = inner, alpha

    def forward(self, *args, **kwargs):
        hidden = args[0] if args else kwargs["hidden_states"]
        out = self.inner(*args, **kwargs)
        first = out[0] if isinstance(out, tuple) else out
        first = first + hidden * self.alpha
        return (first,) + tuple(out[1:]) if isinstance(out, tuple) else first


class SigmoidActivation(nn.Module):
    """x * sigmoid(k * x): SiLU for k = 1, the sigmoid GELU for k = 1.702; the faulty side gets a wrong k."""

    def __init__(self, k):
        super().__init__()
        self.k = k

    def forward(self, x):
        return x * torch.sigmoid(x * self.k)


def _modules_named(block, words):
    return [(n, m) for n, m in block.named_modules() if any(w in type(m).__name__.lower() for w in words)]


def _pick(rng, items):
    return items[rng.randrange(len(items))]


def param_scale(block, side, rng):
    """A parameter of the block (a norm weight or a linear weight, by seed) scaled by 1.01-1.05."""
    params = [(n, p) for n, p in block.named_parameters() if p.dim() >= 1 and "weight" in n]
    name, param = _pick(rng, params)
    factor = 1.0 + rng.choice((0.01, 0.02, 0.03, 0.05))
    if side == "faulty":
        with torch.no_grad():
            param.mul_(factor)
    owner = block.get_submodule(name.rsplit(".", 1)[0]) if "." in name else block
    return owner


def activation_constant(block, side, rng):
    """The block's MLP activation replaced by x * sigmoid(k x) on both sides, k 5 % off on the faulty side."""
    acts = [(n, m) for n, m in block.named_modules() if "act" in n.rsplit(".", 1)[-1] and not list(m.children())]
    name, _ = _pick(rng, acts)
    parent, attr = (block.get_submodule(name.rsplit(".", 1)[0]), name.rsplit(".", 1)[1]) if "." in name \
        else (block, name)
    module = SigmoidActivation(1.702 * (1.05 if side == "faulty" else 1.0))
    setattr(parent, attr, module)
    return module


def _wrap_block(model, blocks_of, index, wrapper):
    blocks = blocks_of(model)
    blocks[index] = wrapper(blocks[index])
    return blocks[index]


def norm_low_precision(block, side, rng):
    """A norm of the block with its output rounded through fp16 on the faulty side."""
    norms = _modules_named(block, ("norm",))
    name, module = _pick(rng, norms)
    parent, attr = (block.get_submodule(name.rsplit(".", 1)[0]), name.rsplit(".", 1)[1]) if "." in name \
        else (block, name)
    wrapped = Rounded(module, torch.float16 if side == "faulty" else torch.float32)
    setattr(parent, attr, wrapped)
    return wrapped


# -- structural faults (issue 40): the two sides make other calls, or the same calls with another argument --

def _attention(block):
    """The block's (outermost) attention module."""
    return next(m for n, m in block.named_modules() if n and "attention" in type(m).__name__.lower())


def _scaled_output(module, factor):
    """module's forward followed by an extra `out[0] * factor` (one more call inside the module)."""
    inner = module.forward

    def forward(*args, **kwargs):
        out = inner(*args, **kwargs)
        return (out[0] * factor,) + tuple(out[1:]) if isinstance(out, tuple) else out * factor
    module.forward = forward


def insert_call(block, side, rng):
    """An extra `out[0] * 1.01` at the end of the block's attention forward on the faulty side."""
    attention = _attention(block)
    if side == "faulty":
        _scaled_output(attention, 1.01)
    return attention


def remove_call(block, side, rng):
    """The bench side scales the block's attention output by 1.01; the faulty side forgot that call."""
    attention = _attention(block)
    if side == "bench":
        _scaled_output(attention, 1.01)
    return attention


def _activation_site(block):
    acts = [(n, m) for n, m in block.named_modules() if "act" in n.rsplit(".", 1)[-1] and not list(m.children())]
    name = acts[0][0]
    parent = block.get_submodule(name.rsplit(".", 1)[0]) if "." in name else block
    return parent, name.rsplit(".", 1)[-1], acts[0][1]


def swap_module(block, side, rng):
    """The block's MLP activation swapped for another class on the faulty side (GELU tanh, or SiLU where it
    was a GELU)."""
    parent, attr, module = _activation_site(block)
    if side == "faulty":
        module = nn.SiLU() if isinstance(module, nn.GELU) else nn.GELU(approximate="tanh")
        setattr(parent, attr, module)
    return module


def scalar_argument(block, side, rng):
    """The block's attention softmax scale 1 % off on the faulty side (sdpa's `scale`, or the eager
    attention's multiplication by the scale)."""
    attention = next(m for n, m in block.named_modules() if hasattr(m, "scaling")
                     and "attention" in type(m).__name__.lower())
    if side == "faulty":
        attention.scaling *= 1.01
    return attention


class LowPrecision(nn.Module):
    """Runs `inner` on its input cast to `dtype` and casts the result back (Tensor.to is not dumped: the
    activation's own call sees the other dtype)."""

    def __init__(self, inner, dtype):
        super().__init__()
        self.inner = inner
        self.probe = torch.zeros((), dtype=dtype)

    def forward(self, x):
        return self.inner(x.to(self.probe.dtype)).to(x.dtype)


def op_dtype(block, side, rng):
    """The block's MLP activation computed in bf16 on the faulty side of an fp32 pair."""
    parent, attr, module = _activation_site(block)
    wrapped = LowPrecision(module, torch.bfloat16 if side == "faulty" else torch.float32)
    setattr(parent, attr, wrapped)
    return wrapped


def _missing_hit(suspect, spans):
    """A call the faulty side lacks: named as missing, and made inside the fault's module on the bench side."""
    return suspect.kind == "missing" and suspect.entry in spans["bench_site"]


@dataclass
class Fault:
    """How to inject one fault and score it. install(model, blocks_of, side, rng) -> the site module (or
    None); base: the (faulty dtype, bench dtype) pair; hit(suspect, span names) -> bool when install
    returns no module; optimizer / batch: (faulty side, bench side) changes to the AdamW eps / batch seed."""
    install: Optional[Callable] = None
    base: tuple = ("bf16", "fp32")
    hit: Optional[Callable] = None
    optimizer_eps: tuple = (1e-8, 1e-8)
    batch_shift: tuple = (0, 0)


def _in_block(function):
    def install(model, blocks_of, side, rng):
        blocks = blocks_of(model)
        return function(blocks[rng.randrange(len(blocks))], side, rng)
    return install


def _residual(alpha):
    def install(model, blocks_of, side, rng):
        index = rng.randrange(len(blocks_of(model)))
        return _wrap_block(model, blocks_of, index, lambda b: Residual(b, alpha if side == "faulty" else 0.0))
    return install


def _optimizer_hit(suspect, spans):
    return suspect.phase == "after backward"


def _loader_hit(suspect, spans):
    return suspect.kind == "input" and suspect.entry in spans["first_call"]


FAULTS = {
    "param_scale": Fault(_in_block(param_scale)),
    "act_constant": Fault(_in_block(activation_constant)),
    "residual_doubled": Fault(_residual(1.0)),
    "residual_dropped": Fault(_residual(-1.0)),
    "norm_fp16": Fault(_in_block(norm_low_precision), base=("fp32", "fp32")),
    "optimizer_eps": Fault(hit=_optimizer_hit, optimizer_eps=(1e-3, 1e-8)),
    "loader_batch": Fault(hit=_loader_hit, batch_shift=(1, 0)),
    # structure before values (issue 40)
    "insert_call": Fault(_in_block(insert_call)),
    "remove_call": Fault(_in_block(remove_call), hit=_missing_hit),
    "swap_module": Fault(_in_block(swap_module)),
    "scalar_argument": Fault(_in_block(scalar_argument)),
    "op_dtype": Fault(_in_block(op_dtype), base=("fp32", "fp32")),
}
STRUCTURAL = ("insert_call", "remove_call", "swap_module", "scalar_argument", "op_dtype")

CLEAN = {"clean_bf16": ("bf16", "fp32"), "clean_fp16": ("fp16", "fp32"), "clean_threads": ("fp32", "fp32")}


# -- dumping ---------------------------------------------------------------------------------------------

class SpanRecorder:
    """The dump entries recorded while a module's forward runs (the API calls inside it, its children)."""

    def __init__(self, debugger, module):
        self.debugger, self.names, self.before = debugger, set(), None
        self.handles = [module.register_forward_pre_hook(self._pre), module.register_forward_hook(self._post)]

    def _keys(self):
        collector = self.debugger.collector
        return set(collector.data) if collector.data else set()

    def _pre(self, module, args):
        self.before = self._keys()

    def _post(self, module, args, output):
        self.names |= self._keys() - (self.before or set())

    def close(self):
        for handle in self.handles:
            handle.remove()


def dump_side(out_dir, model_name, dtype, seed, steps, fault=None, side="bench", threads=None, loss_scale=None):
    """Train `steps` AdamW steps of the model under the debugger (tensor task, level mix); returns
    ([dump.json dicts per step], span names of the fault's site, first call names)."""
    from msprobe.pytorch import PrecisionDebugger

    builder, batch_of, blocks_of = MODELS[model_name]
    torch.manual_seed(seed)
    model = builder()
    rng = random.Random(seed)
    site = fault.install(model, blocks_of, side, rng) if fault and fault.install else None
    # fp16 is run as users run it: autocast with fp32 weights and optimizer (pure fp16 Adam underflows:
    # g*g and eps=1e-8 flush to 0 and the update divides by zero); bf16 is a pure bf16 port
    autocast = dtype == "fp16"
    model = model.to(torch.float32 if autocast else DTYPES[dtype]).train()
    eps = (fault.optimizer_eps[0 if side == "faulty" else 1]) if fault else 1e-8
    shift = (fault.batch_shift[0 if side == "faulty" else 1]) if fault else 0
    optimizer = OPTIMIZERS[OPTIMIZER[0]](model.parameters(), eps)
    # a static loss scale on both sides of an fp16 pair keeps fp16 gradients out of the subnormal range
    scaler = torch.amp.GradScaler("cpu", init_scale=loss_scale, growth_interval=10 ** 6) if loss_scale else None
    config = {"task": "tensor", "dump_path": out_dir, "rank": [], "step": [], "level": "mix",
              "tensor": {"scope": [], "list": [], "data_mode": ["all"]}}
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as handle:
        json.dump(config, handle)
    old_threads = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    debugger = PrecisionDebugger(config_path=os.path.join(out_dir, "config.json"), model=model)
    spans, first = set(), set()
    try:
        for step in range(steps):
            batch = batch_of(seed + 17 * step + shift)
            debugger.start()
            recorder = SpanRecorder(debugger, site) if site is not None and step == 0 else None
            first_rec = SpanRecorder(debugger, model.get_input_embeddings()) if step == 0 else None
            with torch.autocast("cpu", dtype=torch.float16, enabled=autocast):
                loss = model(**batch).loss
            optimizer_step(loss, optimizer, scaler)
            if recorder:
                spans = recorder.names
                recorder.close()
            if first_rec:
                first = first_rec.names
                first_rec.close()
            debugger.stop()
            debugger.step()
    finally:
        debugger.close()
        torch.set_num_threads(old_threads)
    dumps = []
    for step in range(steps):
        rank_dir = os.path.join(out_dir, f"step{step}", "rank")
        if not os.path.isdir(rank_dir):
            rank_dir = os.path.join(out_dir, f"step{step}", sorted(os.listdir(os.path.join(out_dir, f"step{step}")))[0])
        with open(os.path.join(rank_dir, "dump.json")) as handle:
            dumps.append((json.load(handle), os.path.join(rank_dir, "dump_tensor_data")))
    return dumps, spans, first


def optimizer_step(loss, optimizer, scaler):
    """Backward and one optimizer step (through the fp16 pair's GradScaler when there is one)."""
    if scaler is not None:
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    else:
        loss.backward()
        optimizer.step()
    optimizer.zero_grad()




# -- scoring ---------------------------------------------------------------------------------------------

def _is_hit(suspect, spans, site_names, fault):
    if suspect is None:
        return False
    if fault.hit is not None:
        return fault.hit(suspect, {"first_call": spans["first_call"], "bench_site": spans.get("bench_site", set())})
    return suspect.entry in site_names or any(suspect.name.startswith(p) for p in spans["site_prefixes"])


def _rank_when_missed(records, site_names):
    """1-based position of the first row of the fault's site among rows beyond tolerance (None: never)."""
    bad = [r for r in range(len(records)) if records.judgement is not None and records.judgement.suspicious[r]]
    for position, row in enumerate(bad, 1):
        if records.entries[row] in site_names:
            return position
    return None


def score_pair(model_name, pair, faulty, bench, steps_scored, fault, spans):
    """One result dict per (step, mode, level)."""
    results = []
    options = CompareOptions(progress=False, processes=1)
    previous = {}  # (mode, level) -> the step before's records: step N judged against its update (across_steps)
    for step in steps_scored:
        npu_tables = variants(*faulty[step])
        bench_tables = variants(*bench[step])
        npu_dirs, bench_dirs = (_graph_dirs_of(side[step]) for side in (faulty, bench))
        for key in npu_tables:
            start = time.time()
            records = compare_tables(npu_tables[key], bench_tables[key], options)
            if step > 0:
                before = previous.get(key)
                records.suspect = judge_across(records, None if before is None else judge_previous(before, step - 1),
                                               step)
            previous[key] = records
            suspect = records.suspect
            row = {"model": model_name, "pair": pair, "step": step, "mode": key[0], "level": key[1],
                   "optimizer": OPTIMIZER[0],
                   "suspect": suspect.name if suspect else None, "seconds": round(time.time() - start, 2),
                   "red": int((records.color == 2).sum())}
            if fault is None:
                row["false_suspect"] = suspect is not None
            else:
                row["hit"] = _is_hit(suspect, spans, spans["site"], fault)
                if not row["hit"] and fault.hit is None:
                    row["rank"] = _rank_when_missed(records, spans["site"])
            row.update(score_graph(npu_dirs[key], bench_dirs[key], suspect, row, spans, fault))
            results.append(row)
    return results


def _graph_dirs_of(dump):
    rank_dir = os.path.dirname(dump[1])  # <side>/step{N}/rank
    step_dir = os.path.dirname(rank_dir)
    return graph_dirs(rank_dir, os.path.join(os.path.dirname(step_dir), "graph_variants"),
                      step=int(os.path.basename(step_dir)[4:]))


def _node_hit(node, spans):
    """A graph node is a hit when it is a call of the fault's site or a module inside it."""
    return node is not None and (node in spans["site"] or any(node.startswith(p) for p in spans["site_prefixes"]))


def score_graph(npu_dir, bench_dir, suspect, row, spans, fault):
    """The graph's verdict on the same pair: its worst node, its "first" badge, whether they agree with
    the advisor's suspect node, and hit / false suspect as for the advisor. A node is a hit when it is in
    the fault's site, or when it holds the advisor's suspect row and that row is a hit (a parameter row,
    an optimizer or data-loader fault, whose rule is about rows, not nodes)."""
    from msprobe.visualization import graph_verdict

    start = time.time()
    verdict = graph_verdict(npu_dir, bench_dir, fuzzy_match=False, framework="pytorch")
    out = {"graph_worst": verdict.worst_node, "graph_first": verdict.first_node,
           "graph_suspect_node": verdict.suspect_node, "graph_seconds": round(time.time() - start, 2),
           "agree": verdict.worst_node == verdict.suspect_node and verdict.first_node == verdict.suspect_node
           and verdict.suspect == (suspect.name if suspect else None)}
    if fault is None:
        out["graph_false_suspect"] = verdict.worst_node is not None
        out["graph_first_false_suspect"] = verdict.first_node is not None
    else:
        advisor_hit = row["hit"]
        for key, node in (("graph_hit", verdict.worst_node), ("graph_first_hit", verdict.first_node)):
            out[key] = (node is not None and fault.hit is None and _node_hit(node, spans)) or \
                (node is not None and node == verdict.suspect_node and advisor_hit)
    return out


def run_pair(work, model_name, pair, seed, steps, fault=None):
    base = fault.base if fault else CLEAN[pair]
    threads = (1, 2) if pair == "clean_threads" else (None, None)
    scale = 4096.0 if "fp16" in base else None
    faulty, spans, first = dump_side(os.path.join(work, "faulty"), model_name, base[0], seed, steps, fault, "faulty",
                                     threads[0], scale)
    bench, bench_spans, _ = dump_side(os.path.join(work, "bench"), model_name, base[1], seed, steps, fault, "bench", threads[1],
                            scale)
    site_prefixes = set()
    for name in spans:
        if name.startswith("Module."):
            site_prefixes.add(name)
    # the data enters at the first call of the dump (the embedding; T5's encoder embeds through its own
    # module, not get_input_embeddings())
    first = set(first) | {next(iter(faulty[0][0]["data"]), None)}
    info = {"site": spans, "site_prefixes": site_prefixes, "first_call": first, "bench_site": bench_spans}
    scored = range(steps) if fault is None else [0]
    return score_pair(model_name, pair, faulty, bench, scored, fault, info)


def _rate(count, total):
    return f"{count}/{total} ({100.0 * count / total:.0f} %)" if total else "-"


def table(results):
    """Markdown table per mode/level: false suspects on clean pairs at step 0 (both sides start from the
    same weights) and at later steps (weights already moved by each side's optimizer), hit rate on
    faulty pairs, and the faults missed (with the rank of the fault's first row among the rows beyond
    tolerance, '-' when it never exceeds it)."""
    lines = ["| tool | mode | level | false suspects, clean, step 0 | false suspects, clean, later steps "
             "| hit rate, faulty | missed (rank of the fault's site) |", "|---|---|---|---|---|---|---|"]
    for mode, level in sorted({(r["mode"], r["level"]) for r in results}):
        rows = [r for r in results if (r["mode"], r["level"]) == (mode, level)]
        first = [r for r in rows if "false_suspect" in r and r["step"] == 0]
        later = [r for r in rows if "false_suspect" in r and r["step"] > 0]
        faulty = [r for r in rows if "hit" in r]
        missed = ", ".join(f"{r['model']}/{r['pair']} ({r.get('rank') or '-'})" for r in faulty if not r["hit"])
        lines.append(f"| advisor | {mode} | {level} | {_rate(sum(r['false_suspect'] for r in first), len(first))} | "
                     f"{_rate(sum(r['false_suspect'] for r in later), len(later))} | "
                     f"{_rate(sum(r['hit'] for r in faulty), len(faulty))} | {missed or '-'} |")
    for mode, level in sorted({(r["mode"], r["level"]) for r in results if "agree" in r}):
        rows = [r for r in results if (r["mode"], r["level"]) == (mode, level) and "agree" in r]
        first = [r for r in rows if "graph_false_suspect" in r and r["step"] == 0]
        later = [r for r in rows if "graph_false_suspect" in r and r["step"] > 0]
        faulty = [r for r in rows if "graph_hit" in r]
        for tool, suffix in (("graph worst node", ""), ('graph "first" badge', "_first")):
            missed = ", ".join(f"{r['model']}/{r['pair']}" for r in faulty if not r[f"graph{suffix}_hit"])
            lines.append(f"| {tool} | {mode} | {level} | "
                         f"{_rate(sum(r[f'graph{suffix}_false_suspect'] for r in first), len(first))} | "
                         f"{_rate(sum(r[f'graph{suffix}_false_suspect'] for r in later), len(later))} | "
                         f"{_rate(sum(r[f'graph{suffix}_hit'] for r in faulty), len(faulty))} | {missed or '-'} |")
    agreeing = [r for r in results if "agree" in r]
    if agreeing:
        lines.append("")
        lines.append(f"Graph worst node = \"first\" badge = the advisor's suspect node, every pair and mode: "
                     f"{_rate(sum(r['agree'] for r in agreeing), len(agreeing))}.")
    return "\n".join(lines)


def shape_table(results):
    """Markdown table per fault shape (every model, mode and level together): the advisor's hit rate, the
    graph's "first" badge's, and how often graph and advisor agree; clean pairs: false suspects."""
    lines = ["| pair | models | advisor names it first | graph \"first\" badge | graph = advisor |",
             "|---|---|---|---|---|"]
    for pair in dict.fromkeys(r["pair"] for r in results):
        rows = [r for r in results if r["pair"] == pair]
        models = ", ".join(dict.fromkeys(r["model"] for r in rows))
        if "hit" in rows[0]:
            advisor = _rate(sum(r["hit"] for r in rows), len(rows))
            graph = _rate(sum(r.get("graph_first_hit", False) for r in rows), len(rows))
        else:
            advisor = "false suspects " + _rate(sum(r["false_suspect"] for r in rows), len(rows))
            graph = "false badges " + _rate(sum(r.get("graph_first_false_suspect", False) for r in rows), len(rows))
        agree = _rate(sum(r.get("agree", False) for r in rows), len(rows))
        lines.append(f"| {pair} | {models} | {advisor} | {graph} | {agree} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="gpt2 and llama, one step")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--faults", default=",".join(list(CLEAN) + list(FAULTS)))
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--json-only", action="store_true")
    parser.add_argument("--keep", default=None, help="keep the dumps under this directory")
    parser.add_argument("--table-from", nargs="+", default=None, help="only print the table of JSON-line files")
    parser.add_argument("--tools", default="advisor", help="advisor (with the graph) and/or TOOLS of diagnosis_tools.py")
    parser.add_argument("--mindspore", action="store_true", help="also score the advisor on the MindSpore nets")
    parser.add_argument("--optimizer", default="adamw", choices=sorted(OPTIMIZERS),
                        help="each side's optimizer (adamw_fused: transformers 5's default)")
    args = parser.parse_args(argv)
    OPTIMIZER[0] = args.optimizer
    tools = args.tools.split(",")
    others = [name for name in tools if name != "advisor"]
    if args.table_from:
        results = []
        for path in args.table_from:
            with open(path) as handle:
                results += [json.loads(line) for line in handle if line.startswith("{")]
        print(table([r for r in results if "tool" not in r]))
        print(shape_table([r for r in results if "tool" not in r]))
        if any("tool" in r for r in results):  # rows of diagnosis_tools.TOOLS
            import diagnosis_tools

            print(diagnosis_tools.tools_table([r for r in results if "tool" in r]))
        return results
    models = args.models.split(",") if not args.quick or args.models != ",".join(MODELS) else ["gpt2", "llama"]
    steps = 1 if args.quick else args.steps
    torch.set_num_threads(2)
    root = args.keep or tempfile.mkdtemp(prefix="msprobe_diagnosis_")
    results, tool_rows = [], []
    import logging

    logging.getLogger("msprobe").setLevel(logging.WARNING)
    try:
        for model_name in models:
            for pair in args.faults.split(","):
                for seed in range(args.seeds):
                    work = os.path.join(root, f"{model_name}_{pair}_{seed}")
                    fault = FAULTS.get(pair)
                    for row in run_pair(work, model_name, pair, seed, steps, fault) if "advisor" in tools else []:
                        row["seed"] = seed
                        results.append(row)
                        print(json.dumps(row), flush=True)
                    for row in _other_tools(work, model_name, pair, seed, steps, others):
                        print(json.dumps(row, default=str), flush=True)
                        tool_rows.append(row)
                    if not args.keep:
                        shutil.rmtree(work, ignore_errors=True)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    if args.mindspore:
        import diagnosis_mindspore

        ms_rows = diagnosis_mindspore.main(["--seeds", str(args.seeds)])
    if not args.json_only:
        print(table(results))
        print(shape_table(results))
        if tool_rows:
            import diagnosis_tools

            print(diagnosis_tools.tools_table(tool_rows))
        if args.mindspore:
            print(table(ms_rows))
    return results + tool_rows


def _other_tools(work, model_name, pair, seed, steps, names):
    """Rows of the diagnosis_tools TOOLS named (none: nothing imported)."""
    if not names:
        return []
    import diagnosis_tools

    return diagnosis_tools.run_tools(os.path.join(work, "tools"), model_name, pair, seed, steps, names)


if __name__ == "__main__":
    main()
