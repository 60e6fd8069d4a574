"""config_check on real MindSpore training setups: packs written by ConfigChecker(fmk="mindspore"), compared."""
import json
import os
import zipfile

import numpy as np

from msprobe.cli import main
from msprobe.core.config_check import ConfigChecker


def _pack(ms, path, *, seed, lr, data_seed):
    from mindspore import dataset, nn

    from ms_models import Net

    ConfigChecker.apply_patches("mindspore", batches=2)
    try:
        ms.set_seed(seed)
        net = Net()
        ConfigChecker(model=net, output_zip_path=str(path), fmk="mindspore", hyperparameters={"lr": lr, "epochs": 1})
        values = np.random.RandomState(data_seed).randn(8, 4).astype(np.float32)
        data = dataset.NumpySlicesDataset({"x": values}, shuffle=False).batch(4)
        optimizer = nn.SGD(net.trainable_params(), learning_rate=lr)
        grad_fn = ms.value_and_grad(net, None, optimizer.parameters)
        for (batch,) in data.create_tuple_iterator():
            _, grads = grad_fn(batch)
            optimizer(grads)
    finally:
        ConfigChecker.remove_patches()


def _differences(tmp_path, a, b):
    out = tmp_path / "report"
    assert main(["-f", "mindspore", "config_check", "-c", str(a), str(b), "-o", str(out)]) == 0
    [name] = [n for n in os.listdir(out) if n.endswith(".json")]
    with open(out / name) as handle:
        return {(d["check"], d["item"]): d for d in json.load(handle)["differences"]}


def test_mindspore_packs_name_the_seed_weights_data_and_learning_rate(ms, tmp_path):
    _pack(ms, tmp_path / "a.zip", seed=0, lr=0.1, data_seed=0)
    _pack(ms, tmp_path / "same.zip", seed=0, lr=0.1, data_seed=0)
    _pack(ms, tmp_path / "b.zip", seed=1, lr=0.2, data_seed=1)
    same = _differences(tmp_path / "s", tmp_path / "a.zip", tmp_path / "same.zip")
    assert [key for key, d in same.items() if d["impact"] != "low"] == []
    found = _differences(tmp_path, tmp_path / "a.zip", tmp_path / "b.zip")
    assert found[("hyperparameters", "lr")]["impact"] == "high"
    assert (found[("hyperparameters", "lr")]["a"], found[("hyperparameters", "lr")]["b"]) == (0.1, 0.2)
    assert ("random", "seed call 0") in found and "mindspore.set_seed(1)" in found[("random", "seed call 0")]["b"]
    assert ("dataset", "batch 0") in found
    weights = {item for check, item in found if check == "weights"}
    assert "block.fc.weight" in weights
    with zipfile.ZipFile(tmp_path / "a.zip") as archive:
        framework = json.loads(archive.read("framework.json"))
    assert framework["framework"] == "mindspore" and framework["mindspore"] == ms.__version__
