"""free_benchmark in MindSpore PyNative on CPU: ops / Tensor / mint APIs, check and fix, the same CSV."""
import csv
import json

import mindspore as ms
import numpy as np
import pytest
from mindspore import mint, nn, ops

from msprobe.core.errors import ConfigError
from msprobe.core.free_benchmark.csv_writer import HEADER
from msprobe.mindspore import PrecisionDebugger

ms.set_context(mode=ms.PYNATIVE_MODE, device_target="CPU")

RNG = np.random.default_rng(0)
VALUES = RNG.random((8, 2048)).astype(np.float32)          # ops.cumsum in fp16 on CPU: error ~1e-2
BASE = np.ones(16, np.float32) + np.arange(16) * 2 ** -8
NEAR_A, NEAR_B = BASE + 4 * 2 ** -10, BASE                 # 4 fp16 ulps apart: a - b is exact but sensitive


def _debugger(tmp_path, **section):
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"task": "free_benchmark", "dump_path": str(tmp_path / "out"), "level": "L1",
                                  "free_benchmark": section}))
    return PrecisionDebugger(config_path=str(config))


def _rows(tmp_path):
    path = tmp_path / "out" / "free_benchmark.csv"
    if not path.exists():
        return []
    with open(path, newline="") as handle:
        rows = list(csv.reader(handle))
    assert tuple(rows[0]) == HEADER
    return [dict(zip(HEADER, row)) for row in rows[1:]]


def _model(x):
    total = ops.cumsum(x, 1)
    other = mint.matmul(x, x.T)
    return mint.nn.functional.relu(total)[:, -1].mean() + other.mean() + x.exp().mean()


def _window(debugger, fn, *args):
    debugger.start()
    result = fn(*args)
    debugger.stop()
    debugger.step()
    return result


def test_improve_precision_reports_the_fp16_cumsum_only(tmp_path):
    _window(_debugger(tmp_path), _model, ms.Tensor(VALUES, ms.float16))
    rows = _rows(tmp_path)
    assert [r["api_name"] for r in rows] == ["Functional.cumsum.0.forward"]
    row = rows[0]
    assert (row["rank"], row["pert_mode"], row["stage"], row["step"], row["dtype"], row["shape"]) == (
        "0", "improve_precision", "forward", "0", "Float16", "(8, 2048)")
    low = ops.cumsum(ms.Tensor(VALUES, ms.float16), 1).astype(ms.float32).asnumpy().astype(np.float64)
    high = ops.cumsum(ms.Tensor(VALUES, ms.float16).astype(ms.float32), 1).asnumpy().astype(np.float64)
    quotient = np.maximum(np.abs(low), 1e-3) / np.maximum(np.abs(high), 1e-3)
    assert float(row["max_rel"]) == pytest.approx(max(quotient.max(), 1 / quotient.min()) - 1, rel=1e-4)


def test_bit_noise_reports_the_subtraction_of_nearly_equal_numbers(tmp_path):
    a, b = ms.Tensor(NEAR_A, ms.float16), ms.Tensor(NEAR_B, ms.float16)
    _window(_debugger(tmp_path, pert_mode="bit_noise"), lambda: (ops.sub(a, b), mint.mul(a, 2.0), a.exp()))
    assert [r["api_name"] for r in _rows(tmp_path)] == ["Functional.sub.0.forward"]


def test_list_takes_full_api_names(tmp_path):
    a, b = ms.Tensor(NEAR_A, ms.float16), ms.Tensor(NEAR_B, ms.float16)
    debugger = _debugger(tmp_path, pert_mode="change_value", list=["mindspore.mint.mul"])
    _window(debugger, lambda: (ops.sub(a, b), mint.mul(a, b), ops.mul(a, b)))
    assert [r["api_name"] for r in _rows(tmp_path)] == ["Mint.mul.0.forward"]


def test_fix_improves_the_named_api_only(tmp_path):
    x = ms.Tensor(VALUES, ms.float16)
    plain_total, plain_other = ops.cumsum(x, 1), mint.matmul(x, x.T)
    debugger = _debugger(tmp_path, handler_type="fix", list=["mindspore.ops.cumsum"])
    fixed_total, fixed_other = _window(debugger, lambda: (ops.cumsum(x, 1), mint.matmul(x, x.T)))
    reference = np.cumsum(VALUES.astype(np.float16).astype(np.float64), 1)

    def error(value):
        return np.max(np.abs(value.astype(ms.float32).asnumpy() - reference) / reference)

    assert fixed_total.dtype == ms.float16
    assert error(fixed_total) < error(plain_total) / 10
    assert np.array_equal(fixed_other.asnumpy(), plain_other.asnumpy())
    assert _rows(tmp_path) == []


def test_backward_stage_compares_input_gradients(tmp_path):
    a = ms.Tensor(RNG.random((4, 8)), ms.float32)
    b = ms.Tensor(RNG.random((4, 8)), ms.float32)
    debugger = _debugger(tmp_path, pert_mode="change_value", fuzz_stage="backward", list=["mindspore.ops.mul"])
    _window(debugger, lambda: ops.mul(a, b))
    rows = _rows(tmp_path)
    # d(sum(a*b))/db = a: swapping a's first and last value changes that gradient
    assert [(r["api_name"], r["stage"], r["output_index"]) for r in rows] == [("Functional.mul.0.backward",
                                                                               "backward", "1")]


def test_check_mode_leaves_training_bit_identical(tmp_path):
    def train(with_tool):
        ms.set_seed(1)
        net = nn.Dense(8, 4)
        loss_fn = nn.MSELoss()
        optimizer = nn.SGD(net.trainable_params(), learning_rate=0.1)
        grad_fn = ms.value_and_grad(lambda x, y: loss_fn(net(x), y), None, optimizer.parameters)
        debugger = _debugger(tmp_path, pert_mode="bit_noise") if with_tool else None
        losses = []
        for step in range(2):
            x = ms.Tensor(np.random.default_rng(step).random((5, 8)), ms.float32)
            y = ms.Tensor(np.zeros((5, 4)), ms.float32)
            if debugger:
                debugger.start()
            loss, grads = grad_fn(x, y)
            optimizer(grads)
            if debugger:
                debugger.stop()
                debugger.step()
            losses.append(float(loss.asnumpy()))
        return losses, [p.asnumpy().copy() for p in net.trainable_params()]

    plain_losses, plain_params = train(False)
    tool_losses, tool_params = train(True)
    assert plain_losses == tool_losses
    assert all(np.array_equal(a, b) for a, b in zip(plain_params, tool_params))


@pytest.mark.parametrize("section, words", [
    ({"pert_mode": "to_cpu", "fuzz_device": "cpu"}, "not available for MindSpore"),
    ({"scope": ["Functional.sub.0.forward"]}, "scope is not available"),
    ({"list": ["sub"]}, "full MindSpore API name"),
    ({"if_preheat": True}, "if_preheat is not available"),
])
def test_mindspore_rules_are_one_line_errors(tmp_path, section, words):
    with pytest.raises(ConfigError, match=words):
        _debugger(tmp_path, **section)


def test_add_noise_on_healthy_fp16_apis_writes_a_header_only_csv_and_says_so(tmp_path, caplog):
    import logging
    x = ms.Tensor(VALUES[:, :64], ms.float16)
    xt = x.T  # before the window: three calls inside it
    with caplog.at_level(logging.INFO, logger="msprobe"):
        _window(_debugger(tmp_path, pert_mode="add_noise"), lambda: (mint.matmul(x, xt), x.exp(), mint.mul(x, 3.0)))
    assert (tmp_path / "out" / "free_benchmark.csv").read_text() == ",".join(HEADER) + "\n"  # header only
    lines = [r.getMessage() for r in caplog.records if "msprobe free_benchmark step 0" in r.getMessage()]
    assert len(lines) == 1 and "checked 3 call(s) of 3 API(s) (add_noise" in lines[0] and "0 flagged" in lines[0]
