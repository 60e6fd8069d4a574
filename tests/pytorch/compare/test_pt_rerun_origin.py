"""Re-run classification of an origin call: the kernel re-executed in-process on the inputs a tensor dump saved."""
import json

import torch
import torch.nn as nn
import torch.nn.functional as F

from msprobe.core.compare.first_divergence import find_first_divergence
from msprobe.core.compare.rerun import DETERMINISTIC_DIFFERENT, NON_DETERMINISTIC, REPRODUCES_BASELINE
from msprobe.pytorch import PrecisionDebugger
from msprobe.pytorch.determinism import rerun_origin
from tests.pytorch.compare.test_pt_first_divergence import llama_step

CALL = "Functional.silu.0.forward"


class SiluNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.up, self.down = nn.Linear(8, 16), nn.Linear(16, 4)

    def forward(self, x):
        return self.down(F.silu(self.up(x)))


def one_ulp_up(out):
    """The next float up of every element; autograd sees an added constant, so the backward is the kernel's own
    (torch.nextafter has no derivative in torch 2.11)."""
    base = out.detach()
    return out + (torch.nextafter(base, torch.full_like(base, float("inf"))) - base)  # exact: Sterbenz


def run(root, task):
    torch.manual_seed(0)
    model = SiluNet()
    root.mkdir(parents=True, exist_ok=True)
    config = root / "config.json"
    section = {"summary_mode": "xor"} if task == "statistics" else {}
    config.write_text(json.dumps({"task": task, "level": "L1", "dump_path": str(root / "dump"), task: section}))
    debugger = PrecisionDebugger(config_path=str(config))
    debugger.start()
    model(torch.randn(3, 8, generator=torch.Generator().manual_seed(1))).sum().backward()
    debugger.stop()
    debugger.step()
    debugger.close()
    return root / "dump" / "step0" / "rank" / "dump.json"


def silu_kernel(perturb):
    """The kernel under F.silu, one ulp away whenever perturb(call number) is true."""
    original, calls = torch._C._nn.silu, []

    def silu(x):
        calls.append(1)
        out = original(x)
        return one_ulp_up(out) if perturb(len(calls)) else out
    return silu


def test_a_kernel_that_differs_every_time_is_deterministic_different(tmp_path, monkeypatch):
    good = run(tmp_path / "good", "statistics")
    monkeypatch.setattr(torch._C._nn, "silu", silu_kernel(lambda n: True))
    bad = run(tmp_path / "bad", "statistics")
    origin = find_first_divergence(str(bad), str(good), str(tmp_path / "out"))
    assert origin["call"] == CALL and origin["class"] == "origin"
    tensors = run(tmp_path / "bad_tensors", "tensor")
    verdict = rerun_origin(str(tensors), origin["call"], str(good), k=4)
    assert verdict["class"] == DETERMINISTIC_DIFFERENT and verdict["distinct"] == 1
    assert verdict["reruns"][0] != verdict["baseline"] and verdict["matches_observed"] == 4


def test_a_kernel_that_differs_now_and_then_is_non_deterministic(tmp_path, monkeypatch):
    good = run(tmp_path / "good", "statistics")
    monkeypatch.setattr(torch._C._nn, "silu", silu_kernel(lambda n: n % 2 == 0))
    tensors = run(tmp_path / "bad_tensors", "tensor")  # call 1: correct
    verdict = rerun_origin(str(tensors), CALL, str(good), k=4)
    assert verdict["class"] == NON_DETERMINISTIC and verdict["distinct"] == 2
    assert verdict["baseline"] in verdict["reruns"]


def test_a_call_that_is_fine_here_reproduces_the_good_run(tmp_path):
    good = run(tmp_path / "good", "statistics")
    tensors = run(tmp_path / "tensors", "tensor")
    verdict = rerun_origin(str(tensors), CALL, str(good), k=3)
    assert verdict["class"] == REPRODUCES_BASELINE
    assert verdict["reruns"] == [verdict["baseline"]] * 3 == [verdict["observed"]] * 3


def test_a_transformers_llama_with_a_non_deterministic_silu_is_named_and_classified(tmp_path, monkeypatch):
    good = llama_step(tmp_path / "good")
    # every second call of the kernel under F.silu is one ulp off: the 2nd layer's in this run, and every
    # second re-run later
    monkeypatch.setattr(torch._C._nn, "silu", silu_kernel(lambda n: n % 2 == 0))
    bad = llama_step(tmp_path / "bad")
    origin = find_first_divergence(str(bad), str(good), str(tmp_path / "out"))
    assert origin["call"] == "Functional.silu.1.forward" and origin["class"] == "origin"
    tensors = llama_step(tmp_path / "bad_tensors", task="tensor", dump_list=["silu"])
    verdict = rerun_origin(str(tensors / "step0" / "rank" / "dump.json"), origin["call"],
                           str(good / "step0" / "rank" / "dump.json"), k=4)
    assert verdict["class"] == NON_DETERMINISTIC and verdict["distinct"] == 2
    assert verdict["reruns"][0] == verdict["baseline"] != verdict["reruns"][1] == verdict["observed"]
    assert verdict["matches_observed"] == 2
