"""process_num > 0: the checks run in worker processes and give the same rows as in-process checking;
a worker that dies costs only its checks, never the training run."""
import glob
import os

import pytest
import torch

from dispatch_models import FragileMLP, NaiveSoftmaxHead
from msprobe.pytorch.online_dispatch import PtdbgDispatch


def _run(model, x, **kwargs):
    with PtdbgDispatch(**kwargs) as dispatch:
        out = model(x)
        out.float().sum().backward()
    return out.detach(), dispatch


def _without_sequence(rows):
    return [{k: v for k, v in row.items() if k != "sequence"} for row in rows]


def test_workers_give_the_same_rows_as_in_process_checks(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(NaiveSoftmaxHead(8, 8), FragileMLP()).half()
    x = torch.randn(6, 8)
    x[0] *= 40  # row 0 overflows exp in fp16, the other rows stay finite
    x = x.half()
    inline_out, inline = _run(model, x, dump_mode="auto", dump_path=str(tmp_path / "inline"))
    inline_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    worker_out, workers = _run(model, x, dump_mode="auto", dump_path=str(tmp_path / "workers"), process_num=2)
    assert torch.equal(inline_out.view(torch.int16), worker_out.view(torch.int16))  # bits, NaN included
    assert torch.isfinite(worker_out).any()
    assert all(torch.equal(a.view(torch.int16), p.grad.view(torch.int16))
               for a, p in zip(inline_grads, model.parameters()))
    assert workers.unchecked == 0
    assert _without_sequence(workers.results[0]) == _without_sequence(inline.results[0])
    # the bench may differ in its last bits (a worker computes with one thread): floats to 1e-6 absolute
    for in_worker, in_process in zip(_without_sequence(workers.results[1]), _without_sequence(inline.results[1])):
        assert in_worker.keys() == in_process.keys()
        for key, value in in_process.items():
            close = pytest.approx(value, rel=1e-4, abs=1e-6, nan_ok=True) if isinstance(value, float) else value
            assert in_worker[key] == close
    failed = {row["Op Name"] for row in workers.results[0] if row["Accuracy Reached or Not"] == "No"}
    assert {"shift_cancel_0", "exp_0"} <= failed
    # the custom op runs in-process (a worker does not know it), exp in a worker: both dumped alike
    dumped = sorted(os.path.relpath(p, workers.run_dir) for p in glob.glob(os.path.join(workers.run_dir, "*", "*")))
    assert dumped == sorted(os.path.relpath(p, inline.run_dir) for p in glob.glob(os.path.join(inline.run_dir, "*", "*")))
    assert "cpu/exp_0_output.0.npy" in dumped


def test_training_finishes_when_the_workers_die(tmp_path):
    torch.manual_seed(0)
    model = FragileMLP()
    x = torch.randn(4, 8)
    expected = model(x).detach()
    with PtdbgDispatch(dump_path=str(tmp_path), process_num=1) as dispatch:
        worker = dispatch._pool._workers[0].process
        worker.kill()
        worker.wait()
        outs = [model(x) for _ in range(5)]
    assert all(torch.equal(out, expected) for out in outs)
    assert dispatch.unchecked > 0
    rows = dispatch.results[0]
    assert [r["Op Name"] for r in rows] == [f"shift_cancel_{i}" for i in range(5)]  # the in-process ones


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_workers_check_cat_of_empty_tensors_like_in_process(tmp_path, dtype):
    # an empty bf16 tensor did not survive the trip to a worker: both cats came back 'Skipped' with
    # torch.frombuffer's internal message
    def cats():
        empty, full = torch.zeros(0, 4, dtype=dtype), torch.randn(3, 4).to(dtype)
        return torch.cat([empty, full]), torch.cat([empty, empty])

    rows = {}
    for process_num in (0, 1):
        with PtdbgDispatch(dump_path=str(tmp_path / str(process_num)), process_num=process_num) as dispatch:
            cats()
        rows[process_num] = _without_sequence(dispatch.results[0])
    assert rows[1] == rows[0]
    assert [(r["Op Name"], r["Accuracy Reached or Not"], r["Device Dtype"]) for r in rows[1]] == [
        ("cat_0", "Yes", str(dtype)[6:]), ("cat_1", "Yes", str(dtype)[6:])]
    assert not any("frombuffer" in r["Message"] or "buffer length" in r["Message"] for r in rows[1])
