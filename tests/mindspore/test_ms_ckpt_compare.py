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
