"""`msprobe -f mindspore ckpt_compare` on real MindSpore checkpoints, and a MindSpore checkpoint against safetensors."""
import json
import os

import numpy as np
import pytest

from msprobe.cli import main


def _report(out):
    [name] = [n for n in os.listdir(out) if n.endswith(".json")]
    with open(out / name) as handle:
        return json.load(handle)


def test_mindspore_checkpoints_one_scaled_parameter_named_with_its_numbers(ms, tmp_path):
    from ms_models import Net

    ms.set_seed(0)
    net = Net()
    ms.save_checkpoint(net, str(tmp_path / "a.ckpt"))
    weight = net.block.fc.weight
    original = weight.asnumpy().copy()
    weight.set_data(ms.Tensor(original * 1.05))
    # saved as a list of name/data entries, the head's bias as bfloat16
    entries = [{"name": p.name, "data": p.astype(ms.bfloat16) if p.name == "head.bias" else p}
               for p in net.get_parameters()]
    ms.save_checkpoint(entries, str(tmp_path / "b.ckpt"))
    assert main(["-f", "mindspore", "ckpt_compare", "--ckpt1", str(tmp_path / "a.ckpt"), "--ckpt2",
                 str(tmp_path / "b.ckpt"), "-o", str(tmp_path / "out")]) == 0
    report = _report(tmp_path / "out")
    rows = {row["key1"]: row for row in report["parameters"]}
    fc = rows["block.fc.weight"]
    a, b = original.astype(np.float64).ravel(), (original * 1.05).astype(np.float32).astype(np.float64).ravel()
    assert fc["status"] == "differs"
    assert fc["max_abs_diff"] == pytest.approx(np.abs(a - b).max(), rel=1e-12)
    assert fc["l2_2"] == pytest.approx(np.linalg.norm(b), rel=1e-12)
    assert rows["head.bias"]["dtype2"] == "bfloat16" and rows["head.bias"]["dtype1"] == "float32"
    assert report["parameters"][0]["key1"] == "block.fc.weight"
    assert {row["status"] for row in report["parameters"][2:]} == {"equal"}


def test_mindspore_checkpoint_against_safetensors_of_the_same_values(ms, tmp_path):
    from safetensors.numpy import save_file

    from ms_models import Net

    ms.set_seed(1)
    net = Net()
    ms.save_checkpoint(net, str(tmp_path / "net.ckpt"))
    save_file({p.name: p.asnumpy() for p in net.get_parameters()}, str(tmp_path / "net.safetensors"))
    assert main(["-f", "mindspore", "ckpt_compare", "--ckpt1", str(tmp_path / "net.ckpt"), "--ckpt2",
                 str(tmp_path / "net.safetensors"), "-o", str(tmp_path / "out")]) == 0
    report = _report(tmp_path / "out")
    assert report["summary"]["counts"] == {"equal": len(list(net.get_parameters()))}


def test_a_weight_scaled_by_one_and_a_half_ranks_first_of_26_in_a_converted_checkpoint(ms, tmp_path):
    """The issue's case: a conversion that rounds every weight through bfloat16 (cosines about 1 - 1e-6) and scales
    one by 1.5 (cosine 1 up to that rounding): by cosine the scaled weight lands among the others."""
    from mindspore import nn

    class Block(nn.Cell):
        def __init__(self):
            super().__init__()
            self.dense = nn.Dense(16, 16)
            self.norm = nn.LayerNorm((16,))

        def construct(self, x):
            return self.norm(x + ms.ops.relu(self.dense(x)))

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.blocks = nn.SequentialCell([Block() for _ in range(6)])
            self.head = nn.Dense(16, 4)

        def construct(self, x):
            return self.head(self.blocks(x))

    ms.set_seed(0)
    net = Net()
    # a few training steps first, so the LayerNorm betas and biases are no longer at their initial zeros
    step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()), nn.Momentum(net.trainable_params(), 0.05, 0.9))
    rng = np.random.default_rng(1)
    for _ in range(3):
        step(ms.Tensor(rng.standard_normal((32, 16)), ms.float32), ms.Tensor(rng.standard_normal((32, 4)), ms.float32))
    ms.save_checkpoint(net, str(tmp_path / "a.ckpt"))
    before = {p.name: p.asnumpy().astype(np.float64).ravel() for p in net.get_parameters()}
    assert len(before) == 26
    scaled = "blocks.2.dense.weight"
    for param in net.get_parameters():
        converted = param.astype(ms.bfloat16).astype(ms.float32).asnumpy()
        param.set_data(ms.Tensor(converted * 1.5 if param.name == scaled else converted))
    ms.save_checkpoint(net, str(tmp_path / "b.ckpt"))
    after = {p.name: p.asnumpy().astype(np.float64).ravel() for p in net.get_parameters()}
    assert main(["-f", "mindspore", "ckpt_compare", "--ckpt1", str(tmp_path / "a.ckpt"), "--ckpt2",
                 str(tmp_path / "b.ckpt"), "-o", str(tmp_path / "out")]) == 0
    rows = _report(tmp_path / "out")["parameters"]
    assert len(rows) == 26 and rows[0]["key1"] == scaled
    by_cosine = [row["key1"] for row in sorted(rows, key=lambda row: row["cosine"])]
    assert by_cosine.index(scaled) > 3 and rows[0]["cosine"] > 0.99999
    for row in rows:
        a, b = before[row["key1"]], after[row["key1"]]
        assert row["rel_l2_diff"] == pytest.approx(np.linalg.norm(a - b) / max(np.linalg.norm(a), np.linalg.norm(b)),
                                                   rel=1e-9)
        assert row["norm_ratio"] == pytest.approx(np.linalg.norm(b) / np.linalg.norm(a), rel=1e-9)
    assert [row["rel_l2_diff"] for row in rows] == sorted((row["rel_l2_diff"] for row in rows), reverse=True)
    assert rows[0]["rel_l2_diff"] > 100 * rows[1]["rel_l2_diff"]
