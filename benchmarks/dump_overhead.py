"""Dump overhead of msprobe.pytorch.PrecisionDebugger on a small GPT-style model (CPU, 2 threads).

usage: python benchmarks/dump_overhead.py [config ...]
configs: TASK:LEVEL (statistics:L1 statistics:mix tensor:L1), md5:L1 (statistics with summary_mode md5),
and any of them with ":outside" (config "step" lists only a step that never runs: the cost of a step the
debugger is told to skip, start/stop/step called as usual). MODEL=llama (env) trains a 4-layer
`transformers` Llama (hidden 64, vocab 128, sequence 32, batch 4: small ops, so the per-call Python path
dominates) instead of the GPT. CLOCK=cpu times steps in process CPU time instead of wall time.
Runs, in one process, the training loop without the debugger and then with it for each config
(a baseline run right before each debugger run, REPEATS times, default 2), and prints one JSON
line per config with the lowest median step time of each side (steps 2..STEPS, env STEPS, default 6;
the lowest is the run least disturbed by other processes) and their ratio. The model is the one of
/work/shared/bench/dump_overhead.py (4 blocks, d=256, seq 128, batch 8, AdamW).
"""
import json
import os
import statistics
import sys
import time

import torch
import torch.nn as nn

from overhead_runner import run_configs

STEPS = int(os.environ.get("STEPS", "6"))
MODEL = os.environ.get("MODEL", "gpt")
# CLOCK=cpu: process CPU time instead of wall time (moves less while other processes load the machine)
CLOCK = time.process_time if os.environ.get("CLOCK") == "cpu" else time.perf_counter
REPEATS = int(os.environ.get("REPEATS", "2"))
# issue 21's targets (statistics L1 <= 1.1x, mix <= 1.2x on this GPT; a step outside the step list <= 1.02x);
# tensor:L1 an older wave's
TARGETS = {"statistics:L1": 1.1, "statistics:mix": 1.2, "tensor:L1": 4.0, "statistics:L1:outside": 1.02}
if MODEL == "llama":
    TARGETS = {"statistics:L1": 3.0, "statistics:mix": None, "md5:L1": None, "statistics:L1:outside": 1.02}


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, h, batch_first=True)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        y = self.ln1(x)
        x = x + self.attn(y, y, y, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab=1000, d=256, layers=4, heads=4, ctx=128):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.zeros(1, ctx, d))
        self.blocks = nn.ModuleList([Block(d, heads) for _ in range(layers)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, idx):
        x = self.emb(idx) + self.pos[:, : idx.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def debugged_step(config_path):
    """One training step of GPT under PrecisionDebugger(config_path) (seed 0, 2 threads); the debugger is
    closed, so its files are complete (run_ut_speed and online_run_ut_speed dump with it)."""
    from msprobe.pytorch import PrecisionDebugger

    torch.manual_seed(0)
    torch.set_num_threads(2)
    model = GPT()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    debugger = PrecisionDebugger(config_path=config_path, model=model)
    idx, tgt = torch.randint(0, 1000, (8, 128)), torch.randint(0, 1000, (8, 128))
    debugger.start()
    loss = nn.functional.cross_entropy(model(idx).view(-1, 1000), tgt.view(-1))
    loss.backward()
    opt.step()
    opt.zero_grad()
    debugger.stop()
    debugger.step()
    debugger.close()


def make_model():
    """The benchmark model, its batches (input, target) and its vocabulary size, per MODEL."""
    if MODEL == "llama":
        from transformers import LlamaConfig, LlamaForCausalLM

        config = LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                             num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=64)
        llama = LlamaForCausalLM(config)
        return (lambda idx: llama(input_ids=idx).logits), llama, (4, 32), 128
    gpt = GPT()
    return gpt, gpt, (8, 128), 1000


def write_config(debugger_config, dump_path):
    """config.json for "task:level[:outside]" ("md5:L1": statistics task, summary_mode md5)."""
    task, level, *extra = debugger_config.split(":")
    body = {}
    if task == "md5":
        task, body = "statistics", {"summary_mode": "md5"}
    config = {"task": task, "dump_path": dump_path, "level": level, task: body}
    if "outside" in extra:
        config["step"] = [STEPS + 1000]  # a step never reached: every step runs undumped
    cfg_path = dump_path + ".config.json"
    with open(cfg_path, "w") as handle:
        json.dump(config, handle)
    return cfg_path


def train(debugger_config=None, dump_path=None):
    """Median step time and losses of STEPS training steps (with the debugger when configured)."""
    torch.manual_seed(0)
    forward, model, batch, vocab = make_model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    debugger = None
    if debugger_config:
        from msprobe.pytorch import PrecisionDebugger
        debugger = PrecisionDebugger(config_path=write_config(debugger_config, dump_path), model=model)
    return timed_steps(forward, opt, debugger, batch, vocab)


def training_step(forward, opt, debugger, idx, tgt, vocab, mark=None):
    """One step (forward, cross-entropy, backward, optimizer), inside start/stop/step when a debugger is
    given; returns the loss. `mark()`, when given, is called at the start and after each phase (forward,
    backward, optimizer, stop/step: dump_phases.py times them)."""
    mark = mark or _no_mark
    if debugger:
        debugger.start()
    mark()
    loss = nn.functional.cross_entropy(forward(idx).view(-1, vocab), tgt.view(-1))
    mark()
    loss.backward()
    mark()
    opt.step()
    opt.zero_grad()
    mark()
    if debugger:
        debugger.stop()
        debugger.step()
    mark()
    return loss


def _no_mark():
    pass


def timed_steps(forward, opt, debugger, batch=(8, 128), vocab=1000):
    """STEPS training steps (start/stop/step around each when a debugger is given): the median step time
    after two warm-up steps, and the losses."""
    times, losses = [], []
    for _ in range(STEPS):
        idx = torch.randint(0, vocab, batch)
        tgt = torch.randint(0, vocab, batch)
        t0 = CLOCK()
        loss = training_step(forward, opt, debugger, idx, tgt, vocab)
        times.append(CLOCK() - t0)
        losses.append(loss.item())
    if debugger:
        debugger.close()
    return statistics.median(times[2:]), losses


def main(configs):
    torch.set_num_threads(2)
    run_configs(train, configs, STEPS, REPEATS, TARGETS, model=MODEL)


if __name__ == "__main__":
    main(sys.argv[1:] or list(TARGETS))
