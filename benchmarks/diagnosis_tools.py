"""The diagnosis benchmark's other tools: run_ut, grad compare, TrainerMon alerts and free_benchmark, scored per pair.

Each TOOLS entry is a `Tool(run, claims, hit, limits)`:
  run(ctx) -> [suspect, ...]  what the tool names, its first (most urgent) suspect first; empty: it
                              flags nothing. A suspect is a dict with at least "name".
  claims                      the faults (FAULTS keys of diagnosis_suite) the tool is built to find. A
                              tool is scored for hit rate only on those; on every other faulty pair its
                              row only says whether it flagged anything (not a miss: it cannot see that
                              kind of fault by design, `limits` says why).
  hit(suspect, ctx) -> bool   whether the first suspect is the fault's site.
  limits                      one sentence for the table: what the tool cannot see.
On a clean pair, any suspect is a false suspect. ctx (ToolContext) gives the model, pair, fault, the
fault's site (its module path, its parameters' names, the dump entries made inside it) and a work
directory; helpers below train the pair's sides with a tool attached (`train_side`).
"""
import csv
import glob
import json
import os
import random
from dataclasses import dataclass, field
from typing import Callable, Optional

import torch

import diagnosis_suite as suite

STEPS_FOR_TRENDS = 6  # TrainerMon's turbulence rule needs 3 values of history; more steps give it a chance


@dataclass
class ToolContext:
    """What a tool run gets: the pair, its fault and its site, and a folder of its own."""
    model_name: str
    pair: str
    seed: int
    fault: Optional[object]
    base: tuple
    work: str
    steps: int
    site_path: Optional[str] = None          # named_modules() path of the fault's site module
    site_params: set = field(default_factory=set)   # named_parameters() names inside the site
    site_entries: set = field(default_factory=set)  # dump entries made while the site's forward ran


@dataclass
class Tool:
    """How one tool runs on a pair and how its answer is scored (see the module docstring)."""
    run: Callable
    claims: tuple
    hit: Callable
    limits: str


# -- training a side with a tool attached --------------------------------------------------------------

def _module_path(model, module):
    for name, candidate in model.named_modules():
        if candidate is module:
            return name
    return None


def train_side(ctx, side, steps, attach):
    """Train the model of `ctx` on one side of its pair (the same model, fault, dtype, optimizer and
    batches as diagnosis_suite.dump_side) for `steps` steps with a tool attached:
    attach(model, optimizer) -> (before_step(step), after_step(step), close()). Returns the site's path
    and parameter names."""
    builder, batch_of, blocks_of = suite.MODELS[ctx.model_name]
    fault = ctx.fault
    dtype = ctx.base[0 if side == "faulty" else 1]
    threads = (1, 2)[0 if side == "faulty" else 1] if ctx.pair == "clean_threads" else None
    scale = 4096.0 if "fp16" in ctx.base else None
    torch.manual_seed(ctx.seed)
    model = builder()
    rng = random.Random(ctx.seed)
    site = fault.install(model, blocks_of, side, rng) if fault and fault.install else None
    site_path = _module_path(model, site) if site is not None else None
    site_params = {n for n, _ in site.named_parameters(prefix=site_path)} if site is not None else set()
    autocast = dtype == "fp16"
    model = model.to(torch.float32 if autocast else suite.DTYPES[dtype]).train()
    eps = fault.optimizer_eps[0 if side == "faulty" else 1] if fault else 1e-8
    shift = fault.batch_shift[0 if side == "faulty" else 1] if fault else 0
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, eps=eps)
    scaler = torch.amp.GradScaler("cpu", init_scale=scale, growth_interval=10 ** 6) if scale else None
    old_threads = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    before, after, close = attach(model, optimizer)
    try:
        for step in range(steps):
            batch = batch_of(ctx.seed + 17 * step + shift)
            before(step)
            with torch.autocast("cpu", dtype=torch.float16, enabled=autocast):
                loss = model(**batch).loss
            suite.optimizer_step(loss, optimizer, scaler)
            after(step)
    finally:
        close()
        torch.set_num_threads(old_threads)
    return site_path, site_params


def _nothing(*_):
    return None


def _debugger_attach(config, monitor=False):
    """attach() for a PrecisionDebugger task: start/stop/step around each step (grad_probe: monitor)."""
    def attach(model, optimizer):
        from msprobe.pytorch import PrecisionDebugger

        os.makedirs(config["dump_path"], exist_ok=True)
        path = os.path.join(config["dump_path"], "..", f"config_{config['task']}.json")
        with open(path, "w") as handle:
            json.dump(config, handle)
        debugger = PrecisionDebugger(config_path=path, model=None if monitor else model)
        if monitor:
            debugger.monitor(model, optimizer=optimizer)
            return _nothing, _nothing, debugger.close

        def after(step):
            debugger.stop()
            debugger.step()
        return (lambda step: debugger.start()), after, debugger.close
    return attach


def _site_of(ctx, site_path, site_params):
    ctx.site_path, ctx.site_params = site_path, site_params


# -- run_ut --------------------------------------------------------------------------------------------

def run_ut(ctx):
    """run_ut (real data) on the faulty side's step-0 tensor dump; suspects: APIs whose forward or
    backward status is error, in dump order."""
    from msprobe.cli import main as cli_main

    dumps, spans, _ = suite.dump_side(os.path.join(ctx.work, "run_ut_dump"), ctx.model_name, ctx.base[0], ctx.seed,
                                      1, ctx.fault, "faulty", 1 if ctx.pair == "clean_threads" else None,
                                      4096.0 if "fp16" in ctx.base else None)
    ctx.site_entries = spans
    rank_dir = os.path.dirname(dumps[0][1])
    out = os.path.join(ctx.work, "run_ut_out")
    os.makedirs(out, exist_ok=True)
    code = cli_main(["-f", "pytorch", "run_ut", "-api_info", os.path.join(rank_dir, "dump.json"), "-o", out])
    if code:
        raise RuntimeError(f"run_ut exited with {code}")
    result = sorted(glob.glob(os.path.join(out, "accuracy_checking_result_*.csv")))[-1]
    with open(result, newline="", encoding="utf-8-sig") as handle:
        rows = list(csv.reader(handle))[1:]
    suspects = [{"name": row[0], "forward": row[1], "backward": row[2], "message": row[3][:120]}
                for row in rows if "error" in (row[1].lower(), row[2].lower())]
    counts = {}
    for row in rows:
        status = "error" if "error" in (row[1].lower(), row[2].lower()) else "warning" if "warning" in (
            row[1].lower(), row[2].lower()) else "SKIP" if row[1] == "SKIP" else "pass"
        counts[status] = counts.get(status, 0) + 1
    ctx.info = {"apis": len(rows), **counts}
    return suspects


def _run_ut_hit(suspect, ctx):
    return any(entry.startswith(suspect["name"] + ".") for entry in ctx.site_entries)


# -- grad compare ----------------------------------------------------------------------------------------

def grad_compare(ctx):
    """grad_probe (L1: directions) on both sides for `ctx.steps` steps, then GradComparator; suspects:
    the diverging parameters, earliest step first and the lowest similarity first (its verdict's order)."""
    from msprobe.core.monitor.grad_compare import GradComparator, ranked_divergence

    dirs = {}
    for side in ("faulty", "bench"):
        dump_path = os.path.join(ctx.work, f"grad_{side}")
        config = {"task": "grad_probe", "dump_path": dump_path, "rank": [], "step": [],
                  "grad_probe": {"grad_level": "L1", "param_list": [], "bounds": [-1, 0, 1]}}
        site = train_side(ctx, side, ctx.steps, _debugger_attach(config, monitor=True))
        if side == "faulty":
            _site_of(ctx, *site)
        dirs[side] = os.path.join(dump_path, "rank0")
    outcome = GradComparator.compare(dirs["faulty"], dirs["bench"], os.path.join(ctx.work, "grad_compare"))
    return [{"name": name, "step": step, "similarity": round(value, 4)}
            for step, value, name in ranked_divergence(outcome)]


def _grad_hit(suspect, ctx):
    if ctx.fault.hit is suite._optimizer_hit:  # the faulty update shows in the next step's gradients
        return suspect["step"] == 1
    if ctx.fault.hit is not None:  # the data loader: every gradient of step 0 moves
        return suspect["step"] == 0
    return suspect["step"] == 0 and (suspect["name"] in ctx.site_params or bool(
        ctx.site_path and suspect["name"].startswith(ctx.site_path + ".")))


# -- TrainerMon alerts -----------------------------------------------------------------------------------

def trainer_mon(ctx):
    """TrainerMon with every statistic and the three alert rules on the faulty side alone, for
    STEPS_FOR_TRENDS steps; suspects: its alerts in the order it raised them."""
    from msprobe.pytorch import TrainerMon

    out = os.path.join(ctx.work, "monitor_output")
    config_path = os.path.join(ctx.work, "monitor.json")
    os.makedirs(ctx.work, exist_ok=True)
    with open(config_path, "w") as handle:
        json.dump({"wg_distribution": True, "mv_distribution": True, "param_distribution": True,
                   "xy_distribution": True, "all_xy": True, "ur_distribution": True, "format": "csv",
                   "plots": False, "alert": {"rules": [{"rule_name": "AnomalyTurbulence", "args": {"threshold": 0.5}},
                                                      {"rule_name": "AnomalyNan", "args": {}},
                                                      {"rule_name": "VanishingGradient", "args": {}}]}}, handle)
    old = os.environ.get("MONITOR_OUTPUT_DIR")
    os.environ["MONITOR_OUTPUT_DIR"] = out
    holder = {}

    def attach(model, optimizer):
        holder["monitor"] = TrainerMon(config_path, params_have_main_grad=False).set_monitor(model, optimizer=optimizer)
        return _nothing, _nothing, holder["monitor"].remove
    try:
        _site_of(ctx, *train_side(ctx, "faulty", STEPS_FOR_TRENDS, attach))
    finally:
        if old is None:
            os.environ.pop("MONITOR_OUTPUT_DIR", None)
        else:
            os.environ["MONITOR_OUTPUT_DIR"] = old
    alerts = []
    for path in glob.glob(os.path.join(out, "**", "alerts.csv"), recursive=True):
        with open(path, newline="", encoding="utf-8-sig") as handle:
            reader = csv.DictReader(handle)
            alerts += [{"name": row.get("name") or row.get("tag") or json.dumps(row)[:120], **row} for row in reader]
    return alerts


def _never(suspect, ctx):
    return False


# -- free_benchmark --------------------------------------------------------------------------------------

FREE_BENCHMARK_MODES = ("improve_precision", "add_noise", "bit_noise")


def free_benchmark(ctx):
    """free_benchmark check (forward) on the faulty side's step 0, once per mode in FREE_BENCHMARK_MODES;
    suspects: the rows of free_benchmark.csv, in the order written."""
    suspects = []
    for mode in FREE_BENCHMARK_MODES:
        dump_path = os.path.join(ctx.work, f"free_{mode}")
        config = {"task": "free_benchmark", "dump_path": dump_path, "rank": [], "step": [], "level": "L1",
                  "free_benchmark": {"scope": [], "list": [], "fuzz_device": "npu", "pert_mode": mode,
                                     "handler_type": "check", "fuzz_level": "L1", "fuzz_stage": "forward"}}
        _site_of(ctx, *train_side(ctx, "faulty", 1, _debugger_attach(config)))
        path = os.path.join(dump_path, "free_benchmark.csv")
        if os.path.exists(path):
            with open(path, newline="") as handle:
                suspects += [{"name": row["api_name"], "mode": mode, "max_rel": row["max_rel"]}
                             for row in csv.DictReader(handle)]
    if ctx.pair in TOOLS["free_benchmark"].claims:  # the site's calls, from a dump of the same step
        _, ctx.site_entries, _ = suite.dump_side(os.path.join(ctx.work, "site_dump"), ctx.model_name, ctx.base[0],
                                                 ctx.seed, 1, ctx.fault, "faulty")
    return suspects


def _free_benchmark_hit(suspect, ctx):
    return suspect["name"] in ctx.site_entries


TOOLS = {
    "run_ut": Tool(run_ut, claims=(), hit=_run_ut_hit,
                   limits="checks each API against a CPU fp32/fp64 recomputation of the same call: every fault "
                          "here is a model or training choice made of correct API calls, so none is an API error"),
    "grad_compare": Tool(grad_compare, hit=_grad_hit,
                         claims=("param_scale", "act_constant", "residual_doubled", "residual_dropped", "norm_fp16",
                                 "optimizer_eps", "loader_batch"),
                         limits="compares gradient signs per parameter and step: a fault's parameter is the first "
                                "suspect only if its gradient's signs move most; the optimizer and loader faults are "
                                "scored on the step it names (1 and 0)"),
    "trainer_mon": Tool(trainer_mon, claims=(), hit=_never,
                        limits="alerts on a change in time within one run (a norm jumping against its own recent "
                               "median, NaN, vanishing gradients); every fault here is there from step 0, so it has "
                               "no change to see"),
    "free_benchmark": Tool(free_benchmark, claims=("norm_fp16",), hit=_free_benchmark_hit,
                           limits="re-runs each API on perturbed or upcast inputs and flags APIs fragile in their "
                                  "dtype: of these faults only a tensor rounded through fp16 inside an fp32 run "
                                  "(norm_fp16) is such a call; the others are correct APIs. It cannot tell a fragile "
                                  "call that matters from one that does not (a bf16 add of nearly opposite numbers), "
                                  "and fp32 runs have nothing for improve_precision to upcast"),
}


def run_tools(work, model_name, pair, seed, steps, names):
    """Run the TOOLS named on one pair; one result dict per tool."""
    fault = suite.FAULTS.get(pair)
    base = fault.base if fault else suite.CLEAN[pair]
    results = []
    for name in names:
        tool = TOOLS[name]
        ctx = ToolContext(model_name, pair, seed, fault, base, os.path.join(work, name), max(steps, 2))
        ctx.info = {}
        suspects = tool.run(ctx)
        first = suspects[0] if suspects else None
        row = {"tool": name, "model": model_name, "pair": pair, "seed": seed, "flagged": len(suspects),
               "suspect": first, "info": ctx.info, "suspects": [s["name"] for s in suspects[:8]]}
        if fault is None:
            row["false_suspect"] = first is not None
        elif pair in tool.claims:
            row["hit"] = first is not None and tool.hit(first, ctx)
            if not row["hit"]:
                ranks = [i for i, s in enumerate(suspects, 1) if tool.hit(s, ctx)]
                row["rank"] = ranks[0] if ranks else None
        else:
            row["not_claimed"] = True
        results.append(row)
    return results


def _rate(count, total):
    return suite._rate(count, total)


def tools_table(results):
    """Markdown table, one line per tool: false suspects on clean pairs, hit rate on the faults it claims,
    what it flagged on the faults it does not claim, and its limits."""
    lines = ["| tool | false suspects, clean pairs | hit rate, faults it claims | missed (rank of the site) "
             "| flagged anything, faults it does not claim | first false suspects | limits |",
             "|---|---|---|---|---|---|---|"]
    for name in [n for n in TOOLS if any(r["tool"] == n for r in results)]:
        rows = [r for r in results if r["tool"] == name]
        clean = [r for r in rows if "false_suspect" in r]
        claimed = [r for r in rows if "hit" in r]
        other = [r for r in rows if r.get("not_claimed")]
        missed = ", ".join(f"{r['model']}/{r['pair']} ({r.get('rank') or '-'})" for r in claimed if not r["hit"])
        named = sorted({f"{r['model']}/{r['pair']}: `{r['suspect']['name']}`" for r in clean if r["false_suspect"]})
        examples = "; ".join(named[:6]) + (f"; and {len(named) - 6} more" if len(named) > 6 else "")
        lines.append(f"| {name} | {_rate(sum(r['false_suspect'] for r in clean), len(clean))} | "
                     f"{_rate(sum(r['hit'] for r in claimed), len(claimed)) if claimed else 'claims none'} | "
                     f"{missed or '-'} | {_rate(sum(r['flagged'] > 0 for r in other), len(other))} | "
                     f"{examples or '-'} | {TOOLS[name].limits} |")
    return "\n".join(lines)


def main(argv=None):
    """python benchmarks/diagnosis_tools.py [--models gpt2,llama] [--faults clean_bf16,...] [--tools run_ut,...]
    [--seeds 1] [--steps 2] [--table-from FILE ...]: one JSON line per tool and pair, then the table."""
    import argparse
    import logging
    import shutil
    import sys
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(suite.MODELS))
    parser.add_argument("--faults", default=",".join(list(suite.CLEAN) + list(suite.FAULTS)))
    parser.add_argument("--tools", default=",".join(TOOLS))
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--steps", type=int, default=2, help="grad compare's steps (at least 2)")
    parser.add_argument("--table-from", nargs="+", default=None)
    args = parser.parse_args(argv)
    results = []
    if args.table_from:
        for path in args.table_from:
            with open(path) as handle:
                results += [json.loads(line) for line in handle if line.startswith('{"tool"')]
        print(tools_table(results))
        return results
    torch.set_num_threads(2)
    logging.getLogger("msprobe").setLevel(logging.WARNING)
    root = tempfile.mkdtemp(prefix="msprobe_diagnosis_tools_")
    try:
        for model_name in args.models.split(","):
            for pair in args.faults.split(","):
                for seed in range(args.seeds):
                    work = os.path.join(root, f"{model_name}_{pair}_{seed}")
                    for row in run_tools(work, model_name, pair, seed, args.steps, args.tools.split(",")):
                        print(json.dumps(row, default=str), flush=True)
                        results.append(row)
                    shutil.rmtree(work, ignore_errors=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(tools_table(results), file=sys.stdout)
    return results


if __name__ == "__main__":
    main()
