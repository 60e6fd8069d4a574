"""The diagnosis benchmark's MindSpore nets: compare's advisor scored on PyNative mint nets, clean and faulty.

usage: python benchmarks/diagnosis_mindspore.py [--models ms_mlp,ms_attention] [--faults clean_fp16,...]
                                                [--seeds 1] [--table-from FILE ...]

MS_MODELS are small MindSpore nets built from mint ops (PyNative, CPU): blocks of an RMSNorm and either
an MLP (`ms_mlp`: Linear, SiLU, Linear) or self-attention (`ms_attention`: q/k/v/o Linears, softmax),
each with a residual, and a Linear head. Each pair dumps one forward and backward step (value_and_grad)
under msprobe.mindspore.PrecisionDebugger (task tensor, level mix) on both sides, and scores the
advisor's suspect in four variants as diagnosis_suite does (statistics / tensor x mix / L1, L1 being the
same dump without its Cell rows):

  clean_fp16   the whole net in float16 (weights, activations) vs float32; the loss is taken in float32.
  param_scale  a weight of a block (norm or linear, by seed) scaled by 1.01-1.05 in the float16 net.
  norm_fp16    a norm's output rounded through float16 (`type_as`) in a float32 net vs float32.

To add a net: an MS_MODELS entry name -> block class. To add a fault: an MS_FAULTS entry name ->
MsFault(install(net, side, rng) -> the site cell, base=(faulty dtype, bench dtype)). A suspect is a hit
when it is an entry the dump made while the site cell's forward ran (its span), as for PyTorch.
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
from typing import Callable

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from diagnosis_variants import graph_dirs, variants  # noqa: E402
from msprobe.core.compare import CompareOptions, compare_tables  # noqa: E402

DIM, LAYERS, TOKENS, BATCH = 16, 2, 6, 2


def _mindspore():
    import mindspore
    try:
        mindspore.set_device("CPU")
    except RuntimeError:  # the runtime already started (on the CPU)
        pass
    mindspore.set_context(mode=mindspore.PYNATIVE_MODE)
    return mindspore


def _nets():
    """The net classes (built lazily: importing this module must not start MindSpore)."""
    ms = _mindspore()
    from mindspore import Parameter, Tensor, mint, nn

    def linear(rng, d_in, d_out):
        layer = mint.nn.Linear(d_in, d_out)
        layer.weight.set_data(Tensor((rng.standard_normal((d_out, d_in)) / np.sqrt(d_in)).astype(np.float32)))
        layer.bias.set_data(Tensor((0.02 * rng.standard_normal(d_out)).astype(np.float32)))
        return layer

    class RMSNorm(nn.Cell):
        def __init__(self, rng):
            super().__init__()
            self.weight = Parameter(Tensor((1.0 + 0.1 * rng.standard_normal(DIM)).astype(np.float32)), name="weight")

        def construct(self, x):
            return x * mint.rsqrt(mint.mean(x * x, -1, keepdim=True) + 1e-5) * self.weight

    class MlpBlock(nn.Cell):
        def __init__(self, rng):
            super().__init__()
            self.norm = RMSNorm(rng)
            self.up, self.down = linear(rng, DIM, 2 * DIM), linear(rng, 2 * DIM, DIM)

        def construct(self, x):
            return x + self.down(mint.nn.functional.silu(self.up(self.norm(x))))

    class AttentionBlock(nn.Cell):
        def __init__(self, rng):
            super().__init__()
            self.norm = RMSNorm(rng)
            self.q, self.k, self.v, self.o = (linear(rng, DIM, DIM) for _ in range(4))

        def construct(self, x):
            h = self.norm(x)
            scores = mint.matmul(self.q(h), self.k(h).transpose(-1, -2)) * (1.0 / np.sqrt(DIM))
            return x + self.o(mint.matmul(mint.softmax(scores, -1), self.v(h)))

    class Net(nn.Cell):
        def __init__(self, block, seed):
            super().__init__()
            rng = np.random.default_rng(seed)
            self.layers = nn.CellList([block(rng) for _ in range(LAYERS)])
            self.head = linear(rng, DIM, 4)

        def construct(self, x):
            for layer in self.layers:
                x = layer(x)
            return self.head(x)

    class Rounded(nn.Cell):
        """`inner` with its output rounded through `dtype` (float32 on the bench side: the same calls)."""

        def __init__(self, inner, dtype):
            super().__init__()
            self.inner = inner
            self.probe = Tensor(np.zeros((), np.float32)).astype(dtype)

        def construct(self, x):
            out = self.inner(x)
            return out.type_as(self.probe).type_as(out)

    return ms, {"ms_mlp": MlpBlock, "ms_attention": AttentionBlock}, Net, Rounded


MS_MODELS = ("ms_mlp", "ms_attention")


# -- faults -------------------------------------------------------------------------------------------

def _pick(rng, items):
    return items[rng.randrange(len(items))]


def param_scale(net, side, rng):
    """A weight of one block (its norm's or one linear's, by seed) scaled by 1.01-1.05."""
    block = net.layers[rng.randrange(len(net.layers))]
    owners = [cell for name, cell in block.cells_and_names() if name and "weight" in dict(cell.parameters_and_names(
        expand=False))]
    owner = _pick(rng, owners)
    factor = 1.0 + rng.choice((0.01, 0.02, 0.03, 0.05))
    if side == "faulty":
        owner.weight.set_data(owner.weight * factor)
    return owner


def norm_fp16(net, side, rng):
    """One block's norm with its output rounded through float16 on the faulty side."""
    ms, _, _, rounded = _nets()
    block = net.layers[rng.randrange(len(net.layers))]
    block.norm = rounded(block.norm, ms.float16 if side == "faulty" else ms.float32)
    return block.norm


@dataclass
class MsFault:
    """install(net, side, rng) -> the fault's site cell; base: (faulty dtype, bench dtype)."""
    install: Callable
    base: tuple = ("fp16", "fp32")


MS_FAULTS = {"param_scale": MsFault(param_scale), "norm_fp16": MsFault(norm_fp16, base=("fp32", "fp32"))}
MS_CLEAN = {"clean_fp16": ("fp16", "fp32")}


# -- dumping and scoring ---------------------------------------------------------------------------------

class CellSpan:
    """The dump entries recorded while a cell's forward runs."""

    def __init__(self, debugger, cell):
        self.debugger, self.names, self.before = debugger, set(), set()
        self.handles = [cell.register_forward_pre_hook(self._pre), cell.register_forward_hook(self._post)]

    def _keys(self):
        return set(self.debugger.collector.data or {})

    def _pre(self, cell, args):
        self.before = self._keys()

    def _post(self, cell, args, output):
        self.names |= self._keys() - self.before

    def close(self):
        for handle in self.handles:
            handle.remove()


def dump_net(out_dir, model_name, dtype, seed, fault=None, side="bench"):
    """One forward and backward step of the net under the debugger (tensor, mix); returns
    (dump.json dict, tensor folder, span names of the fault's site)."""
    ms, blocks, net_class, _ = _nets()
    from mindspore import Tensor, mint
    from msprobe.mindspore import PrecisionDebugger

    net = net_class(blocks[model_name], seed)
    site = fault.install(net, side, random.Random(seed)) if fault else None
    ms_dtype = ms.float16 if dtype == "fp16" else ms.float32
    for param in net.get_parameters():
        param.set_data(param.astype(ms_dtype))
    rng = np.random.default_rng(1000 + seed)
    x = Tensor(rng.standard_normal((BATCH, TOKENS, DIM)).astype(np.float32)).astype(ms_dtype)
    target = Tensor(rng.standard_normal((BATCH, TOKENS, 4)).astype(np.float32))
    os.makedirs(out_dir, exist_ok=True)
    config = {"task": "tensor", "dump_path": os.path.join(out_dir, "dump"), "rank": [], "step": [], "level": "mix",
              "tensor": {"scope": [], "list": [], "data_mode": ["all"]}}
    with open(os.path.join(out_dir, "config.json"), "w") as handle:
        json.dump(config, handle)
    debugger = PrecisionDebugger(config_path=os.path.join(out_dir, "config.json"))
    grad_fn = ms.value_and_grad(lambda data: mint.mean(mint.square(net(data).astype(ms.float32) - target)), None,
                                net.trainable_params())
    span = None
    try:
        debugger.start(net)
        span = CellSpan(debugger, site) if site is not None else None
        grad_fn(x)
        names = set(span.names) if span else set()
        debugger.stop()
        debugger.step()
    finally:
        if span:
            span.close()
        debugger.close()
    rank_dir = os.path.join(config["dump_path"], "step0", "rank")
    with open(os.path.join(rank_dir, "dump.json")) as handle:
        return json.load(handle), os.path.join(rank_dir, "dump_tensor_data"), names


def ms_variants(raw, data_dir):
    """{(mode, level): DumpTable}: tensor/statistics x mix/L1 (L1: the Cell rows dropped)."""
    return variants(raw, data_dir, module_prefix="Cell.")


def ms_graph_dirs(data_dir):
    """{(mode, level): dump directory} of one side for graph compare (the suite's four variants)."""
    rank_dir = os.path.dirname(data_dir)
    return graph_dirs(rank_dir, os.path.join(os.path.dirname(rank_dir), "graph_variants"),
                                      module_prefix="Cell.")


def score_ms_graph(npu_dir, bench_dir, suspect, row, span, site_cells):
    """The graph's worst node and "first" badge on the same pair, scored as the suite scores PyTorch's: a
    node is a hit when it is a call of the fault's span or a cell inside it, or the advisor's suspect node
    when the advisor hit; a node on a clean pair is a false suspect."""
    from msprobe.visualization import graph_verdict

    verdict = graph_verdict(npu_dir, bench_dir, fuzzy_match=False, framework="mindspore")
    out = {"graph_worst": verdict.worst_node, "graph_first": verdict.first_node,
           "agree": verdict.worst_node == verdict.suspect_node and verdict.first_node == verdict.suspect_node
           and verdict.suspect == (suspect.name if suspect else None)}
    if "hit" not in row:
        out["graph_false_suspect"] = verdict.worst_node is not None
        out["graph_first_false_suspect"] = verdict.first_node is not None
        return out
    for key, node in (("graph_hit", verdict.worst_node), ("graph_first_hit", verdict.first_node)):
        out[key] = node is not None and (node in span or any(node.startswith(cell) for cell in site_cells)
                                         or (node == verdict.suspect_node and row["hit"]))
    return out


def run_ms_pair(work, model_name, pair, seed):
    """Dump both sides of one pair and score the advisor in the four variants."""
    fault = MS_FAULTS.get(pair)
    base = fault.base if fault else MS_CLEAN[pair]
    faulty_raw, faulty_data, span = dump_net(os.path.join(work, "faulty"), model_name, base[0], seed, fault, "faulty")
    bench_raw, bench_data, _ = dump_net(os.path.join(work, "bench"), model_name, base[1], seed, fault, "bench")
    npu, bench = ms_variants(faulty_raw, faulty_data), ms_variants(bench_raw, bench_data)
    npu_dirs, bench_dirs = (ms_graph_dirs(data) for data in (faulty_data, bench_data))
    site_cells = {name.split(".forward")[0] for name in span if name.startswith("Cell.")}
    results = []
    for key in npu:
        start = time.time()
        records = compare_tables(npu[key], bench[key], CompareOptions(progress=False, processes=1))
        suspect = records.suspect
        row = {"model": model_name, "pair": pair, "seed": seed, "step": 0, "mode": key[0], "level": key[1],
               "suspect": suspect.name if suspect else None, "seconds": round(time.time() - start, 2)}
        if fault is None:
            row["false_suspect"] = suspect is not None
        else:
            row["hit"] = suspect is not None and (suspect.entry in span or any(
                suspect.name.startswith(cell + ".") for cell in site_cells))
            if not row["hit"]:
                bad = [r for r in range(len(records)) if records.judgement is not None
                       and records.judgement.suspicious[r]]
                ranks = [i for i, r in enumerate(bad, 1) if records.entries[r] in span]
                row["rank"] = ranks[0] if ranks else None
        row.update(score_ms_graph(npu_dirs[key], bench_dirs[key], suspect, row, span, site_cells))
        results.append(row)
    return results


def main(argv=None):
    import diagnosis_suite

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MS_MODELS))
    parser.add_argument("--faults", default=",".join(list(MS_CLEAN) + list(MS_FAULTS)))
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--table-from", nargs="+", default=None)
    args = parser.parse_args(argv)
    results = []
    if args.table_from:
        for path in args.table_from:
            with open(path) as handle:
                results += [json.loads(line) for line in handle if line.startswith("{")]
        print(diagnosis_suite.table(results))
        return results
    import logging

    logging.getLogger("msprobe").setLevel(logging.WARNING)
    root = tempfile.mkdtemp(prefix="msprobe_diagnosis_ms_")
    try:
        for model_name in args.models.split(","):
            for pair in args.faults.split(","):
                for seed in range(args.seeds):
                    for row in run_ms_pair(os.path.join(root, f"{model_name}_{pair}_{seed}"), model_name, pair, seed):
                        print(json.dumps(row), flush=True)
                        results.append(row)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(diagnosis_suite.table(results))
    return results


if __name__ == "__main__":
    main()
