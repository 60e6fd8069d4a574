"""NaN origin in overflow_check and the flight recorder on an fp16 model whose first overflow is a known exp."""
import json
import os

import pytest
import torch

from msprobe.core.overflow.origin import NaNProducerError
from msprobe.pytorch import PrecisionDebugger


def _chain(x):
    """fp16: exp overflows (producer), inf - inf is nan (propagator), ones_like of it is finite (consumer)."""
    h = x * 2                       # Tensor.__mul__.0  finite
    big = torch.exp(h)              # Torch.exp.0       inf: producer
    nan = big - big                 # Tensor.__sub__.0  inf in, nan out: propagator
    ones = torch.ones_like(nan)     # Torch.ones_like.0 nan in, finite out: consumer
    return (ones + h).sum()


X = torch.tensor([1.0, 3.0, 7.0], dtype=torch.float16)  # exp(14) > 65504


def _debugger(tmp_path, task, **section):
    config = tmp_path / f"{task}.json"
    config.write_text(json.dumps({"task": task, "dump_path": str(tmp_path / "out"), "level": "L1",
                                  task: section}))
    return PrecisionDebugger(config_path=str(config))


def _step_files(tmp_path, step=0):
    folder = tmp_path / "out" / f"step{step}" / "rank"
    data = json.loads((folder / "dump.json").read_text())["data"]
    origin = json.loads((folder / "nan_origin.json").read_text())
    return data, origin


def _run(debugger, steps=1, fn=_chain, x=X):
    for _ in range(steps):
        debugger.start()
        fn(x)
        debugger.stop()
        debugger.step()
    debugger.close()  # files are written off the training thread: wait for them


@pytest.mark.parametrize("nums, names, roles", [
    (1, ["Torch.exp.0.forward"], ["producer"]),
    (2, ["Torch.exp.0.forward", "Tensor.__sub__.0.forward"], ["producer", "propagator"]),
    (-1, ["Torch.exp.0.forward", "Tensor.__sub__.0.forward", "Torch.ones_like.0.forward"],
     ["producer", "propagator", "consumer"]),
])
def test_overflow_nums_and_roles(tmp_path, nums, names, roles, capsys):
    _run(_debugger(tmp_path, "overflow_check", overflow_nums=nums))
    data, origin = _step_files(tmp_path)
    assert list(data) == names
    assert [c["name"] for c in origin["calls"]] == names and [c["role"] for c in origin["calls"]] == roles
    assert origin["first_producer"] == "Torch.exp.0.forward"
    summary = [line for line in capsys.readouterr().out.splitlines() if "first produced by" in line]
    assert len(summary) == 1 and "Torch.exp.0.forward" in summary[0] and "test_pt_nan_origin.py" in summary[0]
    assert "big = torch.exp(h)" in summary[0]


def test_raise_at_the_first_producer(tmp_path):
    debugger = _debugger(tmp_path, "overflow_check", raise_at_producer=True, overflow_nums=-1)
    debugger.start()
    with pytest.raises(NaNProducerError, match="Torch.exp.0.forward"):
        _chain(X)
    debugger.close()
    data, origin = _step_files(tmp_path)
    assert list(data) == ["Torch.exp.0.forward"] and origin["first_producer"] == "Torch.exp.0.forward"


def _masked_then_overflow(x):
    scores = torch.outer(x, x)
    mask = torch.triu(torch.ones(3, 3, dtype=torch.bool), diagonal=1)
    weights = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)  # -inf expected, softmax finite
    return torch.exp(weights * 20 + x)  # exp(27) overflows: the real problem


@pytest.mark.parametrize("ignore, first", [
    ([], "Tensor.masked_fill.0.forward"),
    ([":-inf"], "Torch.exp.0.forward"),
    (["masked_fill:-inf", "softmax:-inf"], "Torch.exp.0.forward"),
    (["masked_fill"], "Torch.softmax.0.forward"),   # softmax still sees the -inf as its input
])
def test_ignore_rules_for_expected_infs(tmp_path, ignore, first):
    _run(_debugger(tmp_path, "overflow_check", ignore_non_finite=ignore), fn=_masked_then_overflow,
         x=torch.tensor([1.0, 2.0, 3.5], dtype=torch.float16))
    data, _ = _step_files(tmp_path)
    assert list(data) == [first]


def test_flight_recorder_writes_only_after_the_nan_with_the_calls_before_it(tmp_path):
    debugger = _debugger(tmp_path, "flight_recorder", depth=2, save_tensors=True)
    finite = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float16)
    _run(debugger, steps=2, x=finite)                   # nothing overflows: nothing written
    assert not (tmp_path / "out").exists() or not any(name.endswith(".json") for _, _, names in
                                                      os.walk(tmp_path / "out") for name in names)
    _run(debugger, steps=1)                             # step 2: exp overflows
    data, origin = _step_files(tmp_path, step=2)
    # the step's records before the exp (one: the window does not reach into earlier steps), then the exp
    assert list(data) == ["Tensor.__mul__.0.forward", "Torch.exp.0.forward"]
    assert origin["first_producer"] == "Torch.exp.0.forward"
    mul = data["Tensor.__mul__.0.forward"]
    assert mul["output"][0]["Max"] == 14.0
    saved = tmp_path / "out" / "step2" / "rank" / "dump_tensor_data" / mul["output"][0]["data_name"]
    assert torch.equal(torch.load(saved, weights_only=True), X * 2)
    assert not (tmp_path / "out" / "step3").exists()   # recording stopped after the first inf/nan


def test_flight_recorder_depth_bounds_the_window(tmp_path):
    def many(x):
        for _ in range(5):
            x = x + 1
        return torch.exp(x * 2)

    _run(_debugger(tmp_path, "flight_recorder", depth=3), fn=many)
    data, _ = _step_files(tmp_path)
    assert list(data) == ["Tensor.__add__.3.forward", "Tensor.__add__.4.forward", "Tensor.__mul__.0.forward",
                          "Torch.exp.0.forward"]
