"""First divergence on real models: two fingerprint dumps of the same training step, one run changed."""
import json
import os
import sys

import torch

from msprobe.core.compare import compare_dumps
from msprobe.core.compare.first_divergence import find_first_divergence
from msprobe.pytorch import PrecisionDebugger
from tests.pytorch.dump.hf_models import VOCAB, tiny_llama
from tests.core.dump.test_fingerprint import python_fingerprint
from tests.pytorch.dump.pt_dump_helpers import MLP, run_dump


def one_ulp_up(out):
    """The next float up of every element; autograd sees an added constant, so the backward is the kernel's own
    (torch.nextafter has no derivative in torch 2.11)."""
    base = out.detach()
    return out + (torch.nextafter(base, torch.full_like(base, float("inf"))) - base)  # exact: Sterbenz


def llama_step(root, level="L1", change=None, summary_mode="xor", task="statistics", dump_list=()):
    """One forward+backward of a seeded tiny Llama under the debugger, `change(model)` applied first (task
    "tensor": the tensors of the calls `dump_list` names)."""
    torch.manual_seed(0)
    model = tiny_llama()
    if change is not None:
        change(model)
    root.mkdir(parents=True, exist_ok=True)
    config = root / "config.json"
    section = {"summary_mode": summary_mode} if task == "statistics" else {"list": list(dump_list)}
    config.write_text(json.dumps({"task": task, "level": level, "dump_path": str(root / "dump"), task: section}))
    debugger = PrecisionDebugger(config_path=str(config))
    ids = torch.randint(0, VOCAB, (2, 8), generator=torch.Generator().manual_seed(1))
    debugger.start(model)
    model(input_ids=ids, labels=ids).loss.backward()
    debugger.stop()
    debugger.step()
    debugger.close()
    return root / "dump"


def silu_kernel_off_by_one_ulp_on_call(number):
    """The kernel under F.silu, giving a result one ulp away on its `number`-th call: one op made
    non-deterministic inside the recorded call (F.silu looks torch._C._nn.silu up at each call)."""
    original, calls = torch._C._nn.silu, []

    def silu(x):
        calls.append(1)
        out = original(x)
        return one_ulp_up(out) if len(calls) == number else out
    return silu


def test_non_deterministic_op_is_named_as_the_origin(tmp_path, monkeypatch):
    good = llama_step(tmp_path / "a")
    with monkeypatch.context() as patch:
        patch.setattr(torch._C._nn, "silu", silu_kernel_off_by_one_ulp_on_call(2))  # the second layer's MLP
        bad = llama_step(tmp_path / "b")
    report = find_first_divergence(str(bad), str(good), str(tmp_path / "out"))
    assert report["sequence_same"] is True
    assert report["call"] == "Functional.silu.1.forward"
    assert report["class"] == "origin" and report["differing_inputs"] == []
    assert report["step"] == 0 and report["rank"] == 0
    assert any("modeling_llama" in line for line in report["stack"])
    assert report["propagated"] > 10  # every later call only carries the difference on
    assert [o["call"] for o in report["origins"]][0] == "Functional.silu.1.forward"
    written = json.loads((tmp_path / "out" / "first_divergence.json").read_text())
    assert written["call"] == report["call"] and len(written["ranks"]) == 1


def test_identical_runs_have_no_divergence(tmp_path):
    one, two = llama_step(tmp_path / "a"), llama_step(tmp_path / "b")
    report = find_first_divergence(str(one), str(two), str(tmp_path / "out"))
    assert report["call"] is None and report["ranks"][0]["calls_compared"] > 50


def test_a_flipped_parameter_bit_names_the_parameter(tmp_path):
    def flip(model):
        with torch.no_grad():
            model.model.layers[1].mlp.up_proj.weight.view(torch.int32)[3, 5] ^= 1
    good = llama_step(tmp_path / "a", level="mix")
    bad = llama_step(tmp_path / "b", level="mix", change=flip)
    report = find_first_divergence(str(bad), str(good), str(tmp_path / "out"))
    assert report["class"] == "parameter"
    assert report["why"] == "input_args.1 is parameter model.layers.1.mlp.up_proj.weight, which differs"
    good_data = json.loads((good / "step0" / "rank" / "dump.json").read_text())["data"]
    assert good_data[report["call"]]["input_args"][1]["shape"] == [64, 32]  # the up_proj linear, 2nd layer
    assert report["differing_inputs"] == ["input_args.1"]
    assert [o["call"] for o in report["origins"]] == [report["call"]]  # the module entry listing it again: propagated


def test_compare_of_md5_dumps_writes_the_first_divergence(tmp_path, capsys):
    torch.manual_seed(0)
    good = run_dump(tmp_path, MLP(), section={"summary_mode": "md5"})
    other = tmp_path / "b"
    other.mkdir()
    torch.manual_seed(0)
    model = MLP()
    with torch.no_grad():
        model.fc2.bias.view(torch.int32)[0] ^= 1 << 31  # the sign bit
    bad = run_dump(other, model, section={"summary_mode": "md5"})
    compare_dumps(str(bad), str(good), str(tmp_path / "out"))
    report = json.loads((tmp_path / "out" / "first_divergence.json").read_text())
    assert report["key"] == "md5"
    assert report["call"] == "Functional.linear.1.forward" and report["class"] == "input"
    assert report["differing_inputs"] == ["input_args.2"]
    assert "first divergence (step 0 rank 0): Functional.linear.1.forward [input]" in capsys.readouterr().out


def test_sequences_that_part_name_the_first_different_call(tmp_path):
    def extra_call(model):
        forward = model.model.norm.forward
        model.model.norm.forward = lambda h: forward(torch.relu(h) - torch.relu(-h))
    good = llama_step(tmp_path / "a")
    bad = llama_step(tmp_path / "b", change=extra_call)
    report = find_first_divergence(str(bad), str(good), str(tmp_path / "out"))
    assert report["sequence_same"] is False and report["class"] == "sequence"
    assert report["call"] == report["sequence"]["call"] == "Torch.relu.0.forward"
    assert sys.modules  # the run above did not leave the model patched for later tests


def gpt2_step(root, seed):
    """One training step of a seeded tiny GPT-2 with dropout; `seed` is set just before the step."""
    from tests.pytorch.dump.hf_models import tiny_gpt2
    torch.manual_seed(0)
    model = tiny_gpt2(dropout=0.1)
    model.train()
    root.mkdir(parents=True, exist_ok=True)
    config = root / "config.json"
    config.write_text(json.dumps({"task": "statistics", "level": "L1", "dump_path": str(root / "dump"),
                                  "statistics": {"summary_mode": "xor"}}))
    debugger = PrecisionDebugger(config_path=str(config))
    ids = torch.randint(0, VOCAB, (2, 8), generator=torch.Generator().manual_seed(1))
    torch.manual_seed(seed)
    debugger.start(model)
    model(input_ids=ids, labels=ids).loss.backward()
    debugger.stop()
    debugger.step()
    debugger.close()
    return root / "dump"


def test_rng_audit_records_the_generator_state_of_each_random_call(tmp_path):
    root = gpt2_step(tmp_path / "a", seed=7)
    data = json.loads((root / "step0" / "rank" / "dump.json").read_text())["data"]
    random_calls = [name for name, body in data.items() if "rng" in body]
    random_apis = ("Functional.dropout.", "Functional.scaled_dot_product_attention.")  # attention dropout
    assert random_calls == [name for name in data if name.startswith(random_apis) and name.endswith("forward")]
    torch.manual_seed(7)
    first_state = torch.random.get_rng_state().numpy().tobytes()
    assert data[random_calls[0]]["rng"] == python_fingerprint(first_state)
    assert len({data[name]["rng"] for name in random_calls}) == len(random_calls)  # each draw moves the state


def _gpt2_step_in_a_fresh_process(root, seed):
    """gpt2_step in its own interpreter: the random streams compared here must not depend on what earlier
    tests left in this process's global state (it failed only inside the whole suite)."""
    import subprocess
    import sys

    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    code = (f"import sys, pathlib; sys.path.insert(0, {repo!r}); "
            "from tests.pytorch.compare.test_pt_first_divergence import gpt2_step; "
            f"gpt2_step(pathlib.Path({str(root)!r}), seed={seed})")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=repo)
    assert done.returncode == 0, done.stderr[-2000:]
    return root / "dump"


def test_a_differently_seeded_dropout_names_the_first_random_call(tmp_path):
    good = _gpt2_step_in_a_fresh_process(tmp_path / "a", 7)
    bad = _gpt2_step_in_a_fresh_process(tmp_path / "b", 8)
    report = find_first_divergence(str(bad), str(good), str(tmp_path / "out"))
    data = json.loads((good / "step0" / "rank" / "dump.json").read_text())["data"]
    first_random = next(name for name, body in data.items() if "rng" in body)
    assert report["call"] == first_random == "Functional.dropout.0.forward"
    assert report["class"] == "random"
    assert [o["class"] for o in report["origins"]] == ["random"]  # later dropouts only carry it on


def test_multi_rank_roots_give_one_record_per_rank_and_the_earliest(tmp_path, monkeypatch):
    import shutil
    good = llama_step(tmp_path / "a")
    with monkeypatch.context() as patch:
        patch.setattr(torch._C._nn, "silu", silu_kernel_off_by_one_ulp_on_call(1))
        bad = llama_step(tmp_path / "b")
    same = llama_step(tmp_path / "c")  # rank 0 of the run under test: identical to the good run
    roots = {"good": tmp_path / "good_root", "bad": tmp_path / "bad_root"}
    for rank, (good_src, bad_src) in enumerate([(good, same), (good, bad)]):
        shutil.copytree(good_src / "step0" / "rank", roots["good"] / "step0" / f"rank{rank}")
        shutil.copytree(bad_src / "step0" / "rank", roots["bad"] / "step0" / f"rank{rank}")
    report = find_first_divergence(str(roots["bad"]), str(roots["good"]), str(tmp_path / "out"))
    by_rank = {record["rank"]: record for record in report["ranks"]}
    assert set(by_rank) == {0, 1}
    assert by_rank[0]["call"] is None
    assert by_rank[1]["call"] == "Functional.silu.0.forward" and by_rank[1]["class"] == "origin"
    assert report["rank"] == 1 and report["call"] == "Functional.silu.0.forward"


def test_compare_of_plain_statistics_dumps_writes_no_first_divergence(tmp_path):
    torch.manual_seed(0)
    one = run_dump(tmp_path, MLP())
    (tmp_path / "b").mkdir()
    torch.manual_seed(0)
    two = run_dump(tmp_path / "b", MLP())
    outcomes = compare_dumps(str(one), str(two), str(tmp_path / "out"))
    assert outcomes and not (tmp_path / "out" / "first_divergence.json").exists()
