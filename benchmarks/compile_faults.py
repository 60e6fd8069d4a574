"""Compile-fault benchmark: does compile_check name the module of a planted torch.compile fault?

usage: python benchmarks/compile_faults.py [--faults name,...] [--json-only] [--keep DIR] [--no-module-by-module]
       python benchmarks/compile_faults.py --minifier name,... [--minifier-timeout 600]

Each FAULTS entry is a small `transformers` model built from a tiny config (float32 unless said) and a faulty
torch.compile backend: an FX rewrite of the graph Dynamo hands it (the way a compiler pass changes what it sees),
then aot_eager (no C++ compile). Three kinds (`expected`: the modules the fault changes):

  lowering  one op lowered wrong: an activation, a softmax or a layer norm computed another way
  dtype     one intermediate in another dtype: an rsqrt, a cos, a matmul's operands
  fusion    a fusion that matches a pattern across ops (and modules) and drops an upcast or rounds inside it:
            a SwiGLU whose SiLU is fed by its gate projection's linear, a residual add feeding a layer norm,
            an RMSNorm whose float32 upcast is dropped (bfloat16 model)

compile_check runs each (whole graph and module by module). A fault is *named* by the whole-graph search when
its faulty modules are exactly the `expected` ones (every module the fault changes, no other); by the
module-by-module view when its first departure's module is one of them (it names one module).
Printed: per fault, the departure (epsilons), the modules named, trials and seconds, and the hit rate of each
view.

`--minifier`: run PyTorch's accuracy minifier on the same faults instead (TORCHDYNAMO_REPRO_LEVEL=4, with
TORCHDYNAMO_REPRO_AFTER "aot" and "dynamo"; `--minifier-tolerance` sets its repro_tolerance): one run of the
compiled model, then the minifier launcher it writes, each in a subprocess; recorded: whether it found an
accuracy failure, its trials (the launcher's "Strategy:" lines: one candidate graph checked each), seconds,
and whether the minimised graph names the expected module (its parameters' or nodes' names hold the module
path).
"""
import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Callable, List

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))


SEQ, BATCH = 8, 2


def _ids(vocab=64):
    return torch.randint(0, vocab, (BATCH, SEQ), generator=torch.Generator().manual_seed(1))


def llama(dtype=torch.float32):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=32,
                         attn_implementation="eager")
    return LlamaForCausalLM(config).eval().to(dtype), (_ids(),)


def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=64, n_embd=16, n_layer=2, n_head=2, n_positions=32, resid_pdrop=0.0,
                        embd_pdrop=0.0, attn_pdrop=0.0, attn_implementation="eager")
    return GPT2LMHeadModel(config).eval(), (_ids(),)


def tiny_swiglu_net():
    """The tests' two-layer SwiGLU net (tests/pytorch/compile_check/faulty_backends.py): a few dozen nodes."""
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "pytorch", "compile_check"))
    from faulty_backends import tiny_input, tiny_net

    return tiny_net(), (tiny_input(),)


def bert():
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=32, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0, attn_implementation="eager")
    return BertModel(config).eval(), (_ids(),)


# -- the faulty ops ---------------------------------------------------------------------------------------------

def bf16_silu(x, inplace=False):
    return x * torch.sigmoid(x.bfloat16()).to(x.dtype)


def bf16_softmax(x, dim=-1, dtype=None, **_):
    return F.softmax(x.bfloat16(), dim=dim).to(dtype or x.dtype)


def bf16_rsqrt(x):
    return torch.rsqrt(x.bfloat16()).to(x.dtype)


def fp16_cos(x):
    return torch.cos(x.half()).to(x.dtype)


def fp16_tanh(x):
    return torch.tanh(x.half()).to(x.dtype)


def tanh_gelu(x, approximate="none"):
    return F.gelu(x, approximate="tanh")


def wide_eps_layer_norm(x, shape, weight=None, bias=None, eps=1e-5):
    return F.layer_norm(x, shape, weight, bias, 1e-2)


def bf16_linear(x, weight, bias=None):
    return F.linear(x.bfloat16(), weight.bfloat16(), None if bias is None else bias.bfloat16()).to(x.dtype)


def fp16_matmul(a, b):
    return torch.matmul(a.half(), b.half()).to(a.dtype)


def bf16_add(a, b):
    return (a.bfloat16() + b.bfloat16()).to(a.dtype)


def same(x, *args, **kwargs):
    return x


def bf16_accumulated_mean(x, dim=-1, keepdim=False):
    """A mean whose sum is accumulated in bfloat16, element after element (a fused kernel without the upcast)."""
    parts = x.bfloat16().unbind(dim)
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    mean = total / len(parts)
    return (mean.unsqueeze(dim) if keepdim else mean).to(x.dtype)


# -- the faulty backends: rewrite, then aot_eager ----------------------------------------------------------------
# A fault matches ops the way a compiler pass does: by op and pattern (every match in the graph is changed), or by
# the parameter an op reads (one module: its weight's values, as Dynamo passes parameters as graph inputs). No
# module path is read, so a fault fires however the graph is framed (whole, split by the search, module by
# module under the dump, or saved by the minifier).

def _targets(node, *targets):
    return node.op in ("call_function", "call_method") and node.target in targets


def rewriting(name, match, replacement, then="aot_eager"):
    """A backend named `name` that replaces the call of every node `match(node, values)` accepts by
    `replacement` (`values(node)`: the tensor a placeholder or attribute node holds), then runs aot_eager (or,
    with `then=None`, the rewritten graph itself)."""

    def backend(graph_module, example_inputs):
        held = {node: value for node, value in zip(
            [n for n in graph_module.graph.nodes if n.op == "placeholder"], example_inputs)}

        def values(node):
            if node.op == "get_attr":
                return graph_module.get_parameter(node.target) if "." in node.target or hasattr(
                    graph_module, node.target) else None
            return held.get(node)
        for node in list(graph_module.graph.nodes):
            if match(node, values):
                node.op, node.target = "call_function", replacement
        graph_module.recompile()
        if then is None:  # the graph module itself (the minifier's check asks its compiled result for parameters)
            return graph_module
        return torch._dynamo.lookup_backend(then)(graph_module, example_inputs)
    backend.__name__ = name
    return backend


def _op(*targets):
    return lambda node, values: _targets(node, *targets)


def _reads_weight_of(builder, path):
    """Matches a linear whose weight holds the values of `path`'s weight in the model `builder` makes."""
    reference = {}

    def match(node, values):
        if not _targets(node, F.linear):
            return False
        if "weight" not in reference:
            reference["weight"] = builder()[0].get_submodule(path).weight.detach()
        weight = values(node.args[1]) if isinstance(node.args[1], torch.fx.Node) else None
        return isinstance(weight, torch.Tensor) and weight.shape == reference["weight"].shape and bool(
            torch.equal(weight.detach(), reference["weight"]))
    return match


def _silu_fed_by_linear(node, values):
    return _targets(node, F.silu) and any(_targets(source, F.linear) for source in node.all_input_nodes)


def _add_feeding_a_layer_norm(node, values):
    """A residual add whose result goes straight into a layer norm (GPT-2's `ln_2(attn_output + residual)`)."""
    return node.op == "call_function" and getattr(node.target, "__name__", "") in ("add", "iadd") and any(
        _targets(user, F.layer_norm) for user in node.users) and len(node.all_input_nodes) == 2


_SOFTMAX = (F.softmax, torch.softmax, "softmax")
_LLAMA_NORMS = [f"model.layers.{i}.{n}" for i in (0, 1) for n in ("input_layernorm", "post_attention_layernorm")]
_LLAMA_NORMS.append("model.norm")


@dataclass
class Fault:
    kind: str
    model: Callable
    backend: Callable
    expected: List[str]


def _bf16_llama():
    return llama(torch.bfloat16)


FAULTS = {
    "llama_silu_lowering": Fault("lowering", llama, rewriting("llama_silu_lowering", _op(F.silu), bf16_silu),
                                 [f"model.layers.{i}.mlp.act_fn" for i in (0, 1)]),
    "llama_softmax_lowering": Fault("lowering", llama, rewriting("llama_softmax_lowering", _op(*_SOFTMAX),
                                                                 bf16_softmax),
                                    [f"model.layers.{i}.self_attn" for i in (0, 1)]),
    "llama_rsqrt_dtype": Fault("dtype", llama, rewriting("llama_rsqrt_dtype", _op(torch.rsqrt), bf16_rsqrt),
                               _LLAMA_NORMS),
    "llama_o_proj_dtype": Fault("dtype", llama, rewriting("llama_o_proj_dtype", _reads_weight_of(
        llama, "model.layers.1.self_attn.o_proj"), bf16_linear), ["model.layers.1.self_attn.o_proj"]),
    "llama_swiglu_fusion": Fault("fusion", llama, rewriting("llama_swiglu_fusion", _silu_fed_by_linear, bf16_silu),
                                 [f"model.layers.{i}.mlp" for i in (0, 1)]),
    "llama_bf16_rmsnorm_variance_in_bf16": Fault("fusion", _bf16_llama, rewriting(
        "llama_bf16_rmsnorm_variance_in_bf16", _op("mean"), bf16_accumulated_mean), _LLAMA_NORMS),
    "gpt2_gelu_tanh_lowering": Fault("lowering", gpt2, rewriting("gpt2_gelu_tanh_lowering", _op(torch.tanh),
                                                                 fp16_tanh),
                                     [f"transformer.h.{i}.mlp.act" for i in (0, 1)]),
    "gpt2_softmax_lowering": Fault("lowering", gpt2, rewriting("gpt2_softmax_lowering", _op(*_SOFTMAX),
                                                               bf16_softmax),
                                   [f"transformer.h.{i}.attn" for i in (0, 1)]),
    "gpt2_layer_norm_lowering": Fault("lowering", gpt2, rewriting("gpt2_layer_norm_lowering", _op(F.layer_norm),
                                                                  wide_eps_layer_norm),
                                      [f"transformer.h.{i}.{n}" for i in (0, 1) for n in ("ln_1", "ln_2")]
                                      + ["transformer.ln_f"]),
    "gpt2_residual_norm_fusion": Fault("fusion", gpt2, rewriting("gpt2_residual_norm_fusion",
                                                                 _add_feeding_a_layer_norm, bf16_add),
                                       [f"transformer.h.{i}" for i in (0, 1)]),
    "tinynet_swiglu_fusion": Fault("fusion", tiny_swiglu_net, rewriting("tinynet_swiglu_fusion", _silu_fed_by_linear,
                                                                        bf16_silu),
                                   [f"layers.{i}.mlp" for i in (0, 1)]),
    # the same, the rewritten graph run as it is (no aot_eager): for the minifier, whose accuracy check raised
    # StopIteration inside aot_eager's compiled forward, and needs a module back from the backend
    "tinynet_swiglu_fusion_no_aot": Fault("fusion", tiny_swiglu_net, rewriting(
        "tinynet_swiglu_fusion_no_aot", _silu_fed_by_linear, bf16_silu, then=None), [f"layers.{i}.mlp" for i in (0, 1)]),
    "llama_swiglu_fusion_no_aot": Fault("fusion", llama, rewriting("llama_swiglu_fusion_no_aot", _silu_fed_by_linear,
                                                                    bf16_silu, then=None),
                                        [f"model.layers.{i}.mlp" for i in (0, 1)]),
    "llama_o_proj_dtype_no_aot": Fault("dtype", llama, rewriting("llama_o_proj_dtype_no_aot", _reads_weight_of(
        llama, "model.layers.1.self_attn.o_proj"), bf16_linear, then=None), ["model.layers.1.self_attn.o_proj"]),
    "bert_gelu_lowering": Fault("lowering", bert, rewriting("bert_gelu_lowering", _op(F.gelu), tanh_gelu),
                                [f"encoder.layer.{i}.intermediate.intermediate_act_fn" for i in (0, 1)]),
    "bert_linear_dtype": Fault("dtype", bert, rewriting("bert_linear_dtype", _reads_weight_of(
        bert, "encoder.layer.1.attention.output.dense"), bf16_linear), ["encoder.layer.1.attention.output.dense"]),
    "bert_scores_matmul_dtype": Fault("dtype", bert, rewriting("bert_scores_matmul_dtype", _op(torch.matmul),
                                                               fp16_matmul),
                                      [f"encoder.layer.{i}.attention.self" for i in (0, 1)]),
}


def run_fault(name, fault, work, module_by_module=True):
    from msprobe.pytorch import compile_check

    model, inputs = fault.model()
    started = time.perf_counter()
    report = compile_check(model, inputs, backend=fault.backend, output_path=os.path.join(work, name),
                           module_by_module=module_by_module)
    total = time.perf_counter() - started
    whole = report["whole_graph"]
    named = [found["module"] for found in whole["faulty_modules"]]
    first = report["first_departure"]
    return {"fault": name, "kind": fault.kind, "expected": fault.expected, "departure_eps": round(whole["departure_eps"], 2),
            "departs": whole["departs"], "named": named,
            "fused_across": [m for found in whole["faulty_modules"] for m in found["fused_across"]],
            "hit": sorted(named) == sorted(fault.expected), "trials": len(whole["trials"]), "seconds": whole["seconds"],
            "module_by_module": first["module"] if first else None,
            "module_by_module_hit": bool(first) and first["module"] in fault.expected,
            "module_by_module_seconds": round(total - whole["seconds"], 1) if module_by_module else None}


def table(rows):
    lines = ["| fault | kind | departure (eps) | compile_check names | trials | s | module by module |",
             "|---|---|---|---|---|---|---|"]
    for row in rows:
        named = ", ".join(row["named"]) or "-"
        if row["fused_across"]:
            named += f" (fused across {', '.join(m.rpartition('.')[2] for m in row['fused_across'])})"
        mark = "hit" if row["hit"] else "MISS"
        by_module = row["module_by_module"] or "nothing departs"
        lines.append(f"| {row['fault']} | {row['kind']} | {row['departure_eps']:.4g} | {named} ({mark}) | {row['trials']} | "
                     f"{row['seconds']:.0f} | {by_module} ({'hit' if row['module_by_module_hit'] else 'miss'}) |")
    for label, scored in (("all planted faults", rows), ("faults departing beyond tolerance",
                                                          [row for row in rows if row["departs"]])):
        hits = sum(row["hit"] for row in scored)
        old = sum(row["module_by_module_hit"] for row in scored)
        lines.append(f"{label}: whole-graph search names {hits}/{len(scored)} "
                     f"({100 * hits / max(len(scored), 1):.0f} %); module by module {old}/{len(scored)}")
    return "\n".join(lines)


# -- PyTorch's accuracy minifier on the same faults --------------------------------------------------------------

_TARGET = """import sys
sys.path.insert(0, {bench!r})
import torch
import compile_faults
fault = compile_faults.FAULTS[{name!r}]
torch._dynamo.register_backend(fault.backend, name="planted_fault")
if {tolerance!r} is not None:
    torch._dynamo.config.repro_tolerance = {tolerance!r}
"""

_RUN = """
model, inputs = fault.model()
out = torch.compile(model, backend="planted_fault")(*inputs)
loss = sum(t.float().sum() for t in compile_faults.floating(out))
loss.backward()
print("NO ACCURACY FAILURE")
"""


def floating(value):
    from msprobe.pytorch.compile_search import floating_tensors

    return floating_tensors(value)


def _mangled(path):
    """How Dynamo writes a module path in a graph's names (l_self_modules_model_modules_layers_modules_1_...)."""
    return "_modules_".join(path.split("."))


def run_minifier(name, fault, work, after, timeout, tolerance=None):
    folder = os.path.join(work, f"minifier_{name}_{after}")
    os.makedirs(folder, exist_ok=True)
    prelude = _TARGET.format(bench=HERE, name=name, tolerance=tolerance)
    with open(os.path.join(folder, "target.py"), "w") as handle:
        handle.write(prelude + _RUN)
    env = {**os.environ, "TORCHDYNAMO_REPRO_AFTER": after, "TORCHDYNAMO_REPRO_LEVEL": "4",
           "PYTHONPATH": os.path.dirname(HERE)}
    started = time.perf_counter()
    try:
        first = subprocess.run([sys.executable, "target.py"], cwd=folder, env=env, capture_output=True, text=True,
                               timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"fault": name, "after": after, "outcome": f"timeout after {timeout} s"}
    with open(os.path.join(folder, "run.log"), "w") as handle:
        handle.write(first.stdout + first.stderr)
    launchers = glob.glob(os.path.join(folder, "**", "minifier_launcher.py"), recursive=True)
    row = {"fault": name, "after": after, "repro_tolerance": tolerance,
           "detect_seconds": round(time.perf_counter() - started, 1)}
    if not launchers:
        tail = (first.stdout + first.stderr).strip().splitlines()[-1:] or [""]
        row["outcome"] = "no accuracy failure found, no minifier launcher written" + (
            "" if "NO ACCURACY FAILURE" in first.stdout else f" ({tail[0][:160]})")
        return row
    launcher = launchers[0]
    with open(launcher) as handle:
        code = handle.read()
    with open(launcher, "w") as handle:  # the launcher looks the backend up by name: register it first
        handle.write(prelude + code)
    started = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, launcher], cwd=os.path.dirname(launcher), env=env,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        row.update(outcome=f"minifier timeout after {timeout} s")
        return row
    log = done.stdout + done.stderr
    with open(os.path.join(folder, "minify.log"), "w") as handle:
        handle.write(log)
    repros = [p for p in glob.glob(os.path.join(folder, "**", "repro.py"), recursive=True)]
    text = open(repros[0]).read() if repros else ""
    graph = text[text.find("class Repro"):] if "class Repro" in text else text
    row.update(minify_seconds=round(time.perf_counter() - started, 1), returncode=done.returncode,
               trials=len(re.findall(r"Strategy: ", log)),
               repro=bool(repros), repro_nodes=len(re.findall(r"^\s+\w+ = ", graph, flags=re.M)),
               names_module=bool(repros) and any(_mangled(path) in graph or path in graph for path in fault.expected),
               outcome="minified" if repros else f"no repro ({(log.strip().splitlines() or [''])[-1][:160]})")
    return row


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--faults", default=",".join(FAULTS))
    parser.add_argument("--json-only", action="store_true")
    parser.add_argument("--keep", default=None, help="folder to keep the outputs in")
    parser.add_argument("--no-module-by-module", action="store_true")
    parser.add_argument("--minifier", default=None, help="faults to run PyTorch's accuracy minifier on")
    parser.add_argument("--minifier-after", default="aot,dynamo")
    parser.add_argument("--minifier-timeout", type=int, default=600)
    parser.add_argument("--minifier-tolerance", type=float, default=None,
                        help="torch._dynamo.config.repro_tolerance for the minifier (its default: 1e-3)")
    args = parser.parse_args(argv)
    work = args.keep or tempfile.mkdtemp(prefix="compile_faults_")
    rows: List[dict] = []
    try:
        if args.minifier:
            for name in args.minifier.split(","):
                for after in args.minifier_after.split(","):
                    rows.append(run_minifier(name, FAULTS[name], work, after, args.minifier_timeout,
                                             args.minifier_tolerance))
                    print(json.dumps(rows[-1]), flush=True)
            return 0
        for name in args.faults.split(","):
            rows.append(run_fault(name, FAULTS[name], work, module_by_module=not args.no_module_by_module))
            print(json.dumps(rows[-1]), flush=True)
        if not args.json_only:
            print(table(rows))
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
