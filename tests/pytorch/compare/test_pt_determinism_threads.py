"""Another thread count, found and classified: a tiny `transformers` GPT-2 trained one step with 1 and with 2
CPU threads (each in a fresh interpreter: the thread count of a process is set once, before any work).

PyTorch's CPU layer-norm backward splits the rows among the threads and adds the per-thread partial sums of
the weight and bias gradients: with 4,096 tokens, 1 and 2 threads group the additions differently, so the
first call whose output differs while its inputs do not is the last layer norm's backward on the project's
CPU. Which kernel parts first depends on the CPU and its BLAS (on a 16-core machine with torch 2.11 it was a
linear's backward, whose matrix products split the work among threads differently), so the test takes the
origin the tool names and checks it from the dump files themselves."""
import json
import os
import subprocess
import sys

from msprobe.core.compare.first_divergence import find_first_divergence
from msprobe.core.compare.rerun import DETERMINISTIC_DIFFERENT, REPRODUCES_BASELINE

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ORIGIN = "Functional.layer_norm.4.backward"  # ln_f, the first layer norm the backward reaches: the project CPU's


def gpt2_step(root, threads, task="statistics", dump_list=()):
    """One training step (16 x 256 tokens) of a seeded tiny GPT-2 without dropout under an L1 dump, with
    `threads` CPU threads. Runs in the calling process: call it from a fresh interpreter."""
    import pathlib

    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from msprobe.pytorch import PrecisionDebugger

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=128, n_embd=32, n_layer=2, n_head=4, n_positions=256,
                                       resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0))
    root = pathlib.Path(root)
    root.mkdir(parents=True, exist_ok=True)
    section = {"summary_mode": "xor"} if task == "statistics" else {"list": list(dump_list)}
    (root / "config.json").write_text(json.dumps({"task": task, "level": "L1", "dump_path": str(root / "dump"),
                                                  task: section}))
    debugger = PrecisionDebugger(config_path=str(root / "config.json"))
    ids = torch.randint(0, 128, (16, 256), generator=torch.Generator().manual_seed(1))
    debugger.start(model)
    model(input_ids=ids, labels=ids).loss.backward()
    debugger.stop()
    debugger.step()
    debugger.close()
    return str(root / "dump" / "step0" / "rank" / "dump.json")


def rerun_in(threads, tensor_dump, bench_dump, call, k=3):
    """rerun_origin of `call` in this process, with `threads` CPU threads."""
    import torch

    from msprobe.pytorch.determinism import rerun_origin

    torch.set_num_threads(threads)
    return rerun_origin(tensor_dump, call, bench_dump, k=k)


def fingerprints(dump, call, side):
    """The xor fingerprints of one side ('input' or 'output') of an entry, read from the dump file itself."""
    entry = json.load(open(dump))["data"][call]
    return [d.get("xor") for d in entry[side] if isinstance(d, dict)]


def in_fresh_process(code):
    """Run `code` (which sets `result`) in a new interpreter importing this module; returns result."""
    script = ("import json, sys; sys.path.insert(0, %r)\n"
              "from tests.pytorch.compare.test_pt_determinism_threads import *\n%s\n"
              "print('RESULT=' + json.dumps(result))" % (REPO, code))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(line for line in done.stdout.splitlines() if line.startswith("RESULT="))
    return json.loads(line[len("RESULT="):])


def test_another_thread_count_is_named_and_classified_deterministic_different(tmp_path):
    good = in_fresh_process(f"result = gpt2_step({str(tmp_path / 'one')!r}, threads=1)")
    bad = in_fresh_process(f"result = gpt2_step({str(tmp_path / 'two')!r}, threads=2)")
    report = find_first_divergence(bad, good, str(tmp_path / "out"))
    origin = report["call"]
    assert report["sequence_same"] and report["class"] == "origin" and origin.endswith(".backward")
    # checked from the files: the origin's inputs are bit-identical in both runs and some output is not
    assert fingerprints(bad, origin, "input") == fingerprints(good, origin, "input")
    assert fingerprints(bad, origin, "output") != fingerprints(good, origin, "output")
    assert report["differing_inputs"] == [] and report["differing_outputs"]
    if origin == ORIGIN:  # this project's CPU: the weight and bias gradients of ln_f
        assert report["differing_outputs"] == ["output.2", "output.3"]
        assert {o["call"].split(".")[1] for o in report["origins"]} == {"layer_norm"}
    # the run under test's tensors at the origin (one more run, 2 threads), re-run there and with 1 thread
    api = origin.split(".")[1]
    verdicts = in_fresh_process(
        f"tensors = gpt2_step({str(tmp_path / 'two_tensors')!r}, threads=2, task='tensor', dump_list=[{api!r}])\n"
        f"result = [rerun_in(2, tensors, {good!r}, {origin!r}), rerun_in(1, tensors, {good!r}, {origin!r})]")
    with_two, with_one = verdicts
    assert with_two["class"] == DETERMINISTIC_DIFFERENT and with_two["distinct"] == 1
    assert with_two["matches_observed"] == 3  # the re-runs give what the run under test computed
    bad_grads = json.load(open(bad))["data"][origin]["output"]
    assert with_two["reruns"][0] == [d["xor"] for d in bad_grads if d is not None]
    assert with_one["class"] == REPRODUCES_BASELINE and with_one["reruns"][0] == with_one["baseline"]
