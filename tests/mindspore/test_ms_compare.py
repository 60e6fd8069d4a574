"""`msprobe -f mindspore compare` on real dumps: MindSpore vs MindSpore (tensor / statistics / md5) and
MindSpore vs PyTorch with the same weights (-am, -cm, -lm, -dm)."""
import glob
import json
import os

import numpy as np
import pytest
import yaml

from ms_test_helpers import fixed_input, write_config


def _ms_dump(ms, directory, net, task="tensor", level="mix", summary_mode="statistics"):
    """One forward+backward of `net` under the MindSpore debugger; returns the dump.json path."""
    from mindspore import Tensor, mint
    from msprobe.mindspore import PrecisionDebugger
    os.makedirs(directory, exist_ok=True)
    config = {"task": task, "level": level}
    if summary_mode != "statistics":
        config[task] = {"summary_mode": summary_mode}
    path, dump_path = write_config(directory, **config)
    debugger = PrecisionDebugger(config_path=path)

    def loss_fn(x):
        return mint.mean(mint.square(net(x)))
    grad_fn = ms.value_and_grad(loss_fn, None, net.trainable_params())
    debugger.start(net)
    grad_fn(Tensor(fixed_input((5, 4), 3)))
    debugger.stop()
    debugger.step()
    debugger.close()
    return os.path.join(dump_path, "step0", "rank", "dump.json")


def _pt_dump(directory, net, task="tensor", level="mix", summary_mode="statistics"):
    import torch
    from msprobe.pytorch import PrecisionDebugger
    os.makedirs(directory, exist_ok=True)
    config = {"task": task, "level": level}
    if summary_mode != "statistics":
        config[task] = {"summary_mode": summary_mode}
    path, dump_path = write_config(directory, **config)
    debugger = PrecisionDebugger(config_path=path)
    debugger.start(net)
    loss = torch.mean(torch.square(net(torch.tensor(fixed_input((5, 4), 3)))))
    loss.backward()
    debugger.stop()
    debugger.step()
    debugger.close()
    return os.path.join(dump_path, "step0", "rank", "dump.json")


def _compare(tmp_path, npu_json, bench_json, *flags, name="out"):
    import pandas as pd
    from msprobe.cli import main
    compare_json = tmp_path / f"{name}.json"
    compare_json.write_text(json.dumps({"npu_path": npu_json, "bench_path": bench_json}))
    out = tmp_path / name
    assert main(["-f", "mindspore", "compare", "-i", str(compare_json), "-o", str(out), *flags]) == 0
    return pd.read_excel(glob.glob(str(out / "compare_result_*.xlsx"))[0])


def _numeric(column):
    import pandas as pd
    return pd.to_numeric(column, errors="coerce")


def _torch_mlp(weights):
    import torch

    class TorchMlp(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.params = torch.nn.ParameterList([torch.nn.Parameter(torch.tensor(w)) for w in weights])

        def forward(self, x):
            w1, b1, w2, b2 = self.params
            h = torch.nn.functional.relu(torch.nn.functional.linear(x, w1, b1))
            return torch.tanh(torch.nn.functional.linear(h, w2, b2))
    return TorchMlp()


def _torch_linear_stack(weights, names):
    import torch
    net = torch.nn.Module()
    w1, b1, w2, b2 = weights
    for name, (w, b) in zip(names, ((w1, b1), (w2, b2))):
        layer = torch.nn.Linear(w.shape[1], w.shape[0])
        with torch.no_grad():
            layer.weight.copy_(torch.tensor(w))
            layer.bias.copy_(torch.tensor(b))
        setattr(net, name, layer)
    net.act = torch.nn.ReLU()
    net.forward = lambda x: getattr(net, names[1])(net.act(getattr(net, names[0])(x)))
    return net


def _ms_linear_stack(weights, names):
    from mindspore import Tensor, mint, nn

    class LinearMlp(nn.Cell):
        def __init__(self):
            super().__init__()
            w1, b1, w2, b2 = weights
            for name, (w, b) in zip(names, ((w1, b1), (w2, b2))):
                layer = mint.nn.Linear(w.shape[1], w.shape[0])
                layer.weight.set_data(Tensor(w))
                layer.bias.set_data(Tensor(b))
                setattr(self, name, layer)
            self.act = mint.nn.ReLU()

        def construct(self, x):
            return getattr(self, names[1])(self.act(getattr(self, names[0])(x)))
    return LinearMlp()


# -- MindSpore vs MindSpore -----------------------------------------------------------------------

def test_ms_vs_ms_same_weights_pass_and_changed_layer_is_found(ms, tmp_path):
    from ms_models import FunctionalMlp, mlp_weights
    weights = mlp_weights()
    changed = list(weights)
    changed[2] = changed[2] + 0.3 * np.sign(changed[2])
    a = _ms_dump(ms, tmp_path / "a", FunctionalMlp(weights))
    b = _ms_dump(ms, tmp_path / "b", FunctionalMlp(weights))
    c = _ms_dump(ms, tmp_path / "c", FunctionalMlp(changed))
    same = _compare(tmp_path, a, b, name="same")
    judged = same[same["Accuracy Reached or Not"].notna()]
    assert len(judged) >= 25 and (judged["Accuracy Reached or Not"] == "Yes").all()
    assert (same["NPU Name"] == same["Bench Name"]).all()
    diff = _compare(tmp_path, a, c, name="diff").set_index("NPU Name")
    assert diff.loc["MintFunctional.linear.0.forward.output.0", "Accuracy Reached or Not"] == "Yes"
    assert diff.loc["MintFunctional.linear.1.forward.input.1", "Accuracy Reached or Not"] == "No"
    assert diff.loc["Mint.tanh.0.forward.output.0", "Accuracy Reached or Not"] == "No"


def test_ms_vs_ms_statistics_and_md5_modes(ms, tmp_path):
    from ms_models import FunctionalMlp, mlp_weights
    weights = mlp_weights()
    changed = list(weights)
    changed[3] = changed[3] + 1.0
    stats_a = _ms_dump(ms, tmp_path / "sa", FunctionalMlp(weights), task="statistics")
    stats_b = _ms_dump(ms, tmp_path / "sb", FunctionalMlp(changed), task="statistics")
    report = _compare(tmp_path, stats_a, stats_b, name="stats").set_index("NPU Name")
    assert "Max diff" in report.columns and "Cosine" not in report.columns
    assert _numeric(report.loc["MintFunctional.linear.0.forward.output.0", "Max diff"]) == 0
    assert _numeric(report.loc["MintFunctional.linear.1.forward.input.2", "Max diff"]) == pytest.approx(-1.0, rel=1e-5)
    md5_a = _ms_dump(ms, tmp_path / "ma", FunctionalMlp(weights), task="statistics", summary_mode="md5")
    md5_b = _ms_dump(ms, tmp_path / "mb", FunctionalMlp(changed), task="statistics", summary_mode="md5")
    md5 = _compare(tmp_path, md5_a, md5_b, name="md5").set_index("NPU Name")
    assert md5.loc["MintFunctional.linear.0.forward.output.0", "Result"] == "pass"
    assert md5.loc["MintFunctional.linear.1.forward.input.2", "Result"] == "Different"


# -- MindSpore vs PyTorch -------------------------------------------------------------------------

def test_ms_vs_pytorch_api_mapping_same_model_cosine_above_0_9999(ms, tmp_path):
    from ms_models import FunctionalMlp, mlp_weights
    weights = mlp_weights()
    ms_json = _ms_dump(ms, tmp_path / "ms", FunctionalMlp(weights))
    pt_json = _pt_dump(tmp_path / "pt", _torch_mlp(weights))
    report = _compare(tmp_path, ms_json, pt_json, "-am")
    matched = report[report["NPU Name"].notna() & report["Bench Name"].notna()]
    assert {"MintFunctional.linear.0.forward.output.0", "Mint.tanh.0.backward.output.0",
            "MintFunctional.linear.0.backward.output.1"} <= set(matched["NPU Name"])
    row = matched.set_index("NPU Name").loc["Mint.tanh.0.forward.output.0"]
    assert row["Bench Name"] == "Torch.tanh.0.forward.output.0"
    cosine = _numeric(matched["Cosine"]).dropna()
    assert len(cosine) >= 25
    assert (cosine > 0.9999).all(), matched[_numeric(matched["Cosine"]) <= 0.9999][["NPU Name", "Cosine"]]
    # without -am the framework prefixes differ and nothing matches
    plain = _compare(tmp_path, ms_json, pt_json, name="plain")
    assert plain["Bench Name"].isna().sum() + plain["NPU Name"].isna().sum() == len(plain)


def test_ms_vs_pytorch_user_api_mapping_yaml_maps_arguments(ms, tmp_path):
    from ms_models import FunctionalMlp, mlp_weights
    weights = mlp_weights()
    ms_json = _ms_dump(ms, tmp_path / "ms", FunctionalMlp(weights), task="statistics")
    pt_json = _pt_dump(tmp_path / "pt", _torch_mlp(weights), task="statistics")
    rules = tmp_path / "api.yaml"
    # map MindSpore tanh onto torch's square call on purpose: the user rule must win over the default
    rules.write_text(yaml.safe_dump({"ms_api": "Mint.tanh", "pt_api": "Torch.square", "ms_args": [0],
                                     "pt_args": [0], "ms_outputs": [0], "pt_outputs": [0]}))
    report = _compare(tmp_path, ms_json, pt_json, "-am", str(rules)).set_index("NPU Name")
    assert report.loc["Mint.tanh.0.forward.output.0", "Bench Name"] == "Torch.square.0.forward.output.0"
    # APIs without a user rule keep the built-in Mint -> Torch defaults
    assert report.loc["MintFunctional.linear.1.forward.output.0", "Bench Name"] == "Functional.linear.1.forward.output.0"


def test_ms_vs_pytorch_cell_mapping_dense_to_linear(ms, tmp_path):
    from ms_models import DenseMlp, mlp_weights
    weights = mlp_weights()
    ms_json = _ms_dump(ms, tmp_path / "ms", DenseMlp(weights), task="statistics", level="L0")
    pt_json = _pt_dump(tmp_path / "pt", _torch_linear_stack(weights, ("fc1", "fc2")), task="statistics", level="L0")
    cell_map = tmp_path / "cells.yaml"
    cell_map.write_text("fc1.Dense: fc1.Linear\nfc2.Dense: fc2.Linear\n")
    report = _compare(tmp_path, ms_json, pt_json, "-cm", str(cell_map)).set_index("NPU Name")
    row = report.loc["Cell.fc2.Dense.forward.0.output.0"]
    assert row["Bench Name"] == "Module.fc2.Linear.forward.0.output.0"
    assert abs(_numeric(row["Max diff"])) < 1e-5
    grad = report.loc["Cell.fc1.Dense.parameters_grad.weight"]
    assert grad["Bench Name"] == "Module.fc1.Linear.parameters_grad.weight"
    assert abs(_numeric(grad["L2norm diff"])) < 1e-5


def test_ms_vs_pytorch_layer_mapping_renames_layers(ms, tmp_path):
    from ms_models import mlp_weights
    weights = mlp_weights()
    ms_json = _ms_dump(ms, tmp_path / "ms", _ms_linear_stack(weights, ("proj_in", "proj_out")),
                       task="statistics", level="L0")
    pt_json = _pt_dump(tmp_path / "pt", _torch_linear_stack(weights, ("fc1", "fc2")), task="statistics", level="L0")
    layers = tmp_path / "layers.yaml"
    layers.write_text("LinearMlp:\n  proj_in: fc1\n  proj_out: fc2\n")
    report = _compare(tmp_path, ms_json, pt_json, "-lm", str(layers)).set_index("NPU Name")
    row = report.loc["Cell.proj_out.Linear.forward.0.output.0"]
    assert row["Bench Name"] == "Module.fc2.Linear.forward.0.output.0"
    assert abs(_numeric(row["Max diff"])) < 1e-5
    assert report.loc["Cell.act.ReLU.forward.0.input.0", "Bench Name"] == "Module.act.ReLU.forward.0.input.0"


def test_ms_vs_pytorch_data_mapping_pairs_single_rows(ms, tmp_path):
    from ms_models import FunctionalMlp, mlp_weights
    weights = mlp_weights()
    ms_json = _ms_dump(ms, tmp_path / "ms", FunctionalMlp(weights), task="statistics")
    pt_json = _pt_dump(tmp_path / "pt", _torch_mlp(weights), task="statistics")
    data_map = tmp_path / "data.yaml"
    data_map.write_text("Mint.tanh.0.forward.output.0: Torch.tanh.0.forward.output.0\n")
    report = _compare(tmp_path, ms_json, pt_json, "-dm", str(data_map))
    matched = report[report["NPU Name"].notna() & report["Bench Name"].notna()]
    assert list(matched["NPU Name"]) == ["Mint.tanh.0.forward.output.0"]
    assert abs(_numeric(matched["Max diff"]).iloc[0]) < 1e-5


def test_ms_vs_pytorch_md5_same_bytes_pass(ms, tmp_path):
    from ms_models import FunctionalMlp, mlp_weights
    weights = mlp_weights()
    ms_json = _ms_dump(ms, tmp_path / "ms", FunctionalMlp(weights), task="statistics", summary_mode="md5")
    pt_json = _pt_dump(tmp_path / "pt", _torch_mlp(weights), task="statistics", summary_mode="md5")
    report = _compare(tmp_path, ms_json, pt_json, "-am").set_index("NPU Name")
    assert "NPU MD5" in report.columns
    for row in ("MintFunctional.linear.0.forward.input.0", "MintFunctional.linear.0.forward.input.1",
                "MintFunctional.linear.1.forward.input.2"):
        assert report.loc[row, "Result"] == "pass"  # identical inputs and weights: identical bytes


def test_ms_vs_pytorch_cells_in_tensor_mode_cosine_above_0_9999_on_every_row(ms, tmp_path):
    """The same two-layer model in both frameworks (mint.nn.Linear / torch.nn.Linear, same weights),
    dumped at L0 with tensors: bare -cm pairs every Cell row (forward, backward, parameters, their
    gradients) with its Module row, and every pair agrees."""
    from ms_models import mlp_weights
    weights = mlp_weights(3)
    names = ("fc1", "fc2")
    ms_json = _ms_dump(ms, tmp_path / "ms", _ms_linear_stack(weights, names), task="tensor", level="L0")
    pt_json = _pt_dump(tmp_path / "pt", _torch_linear_stack(weights, names), task="tensor", level="L0")
    report = _compare(tmp_path, ms_json, pt_json, "-cm")
    matched = report[report["NPU Name"].notna() & report["Bench Name"].notna()]
    assert (matched["NPU Name"].str.replace("Cell.", "Module.", regex=False) == matched["Bench Name"]).all()
    expected = {"Cell.fc1.Linear.forward.0.input.0", "Cell.fc2.Linear.forward.0.output.0",
                "Cell.fc1.Linear.forward.0.parameters.weight", "Cell.fc2.Linear.backward.0.input.0",
                "Cell.fc1.Linear.backward.0.output.0", "Cell.fc1.Linear.parameters_grad.weight",
                "Cell.fc2.Linear.parameters_grad.bias", "Cell.act.ReLU.backward.0.output.0"}
    assert expected <= set(matched["NPU Name"]), expected - set(matched["NPU Name"])
    cosine = _numeric(matched["Cosine"])
    assert cosine.notna().sum() >= len(expected)
    assert (cosine.dropna() > 0.9999).all(), matched[cosine <= 0.9999][["NPU Name", "Cosine"]]
    assert (matched["Accuracy Reached or Not"].dropna() == "Yes").all()


def test_ms_vs_ms_cell_dumps_find_the_changed_layer(ms, tmp_path):
    """Cell (L0) dumps of two versions of a model: rows of the unchanged first layer pass, the second
    layer's weight and output are flagged (reference: compare of cell dumps across versions)."""
    from ms_models import DenseMlp, mlp_weights
    weights = mlp_weights(1)
    changed = list(weights)
    changed[2] = changed[2] * -1.0
    a = _ms_dump(ms, tmp_path / "a", DenseMlp(weights), task="tensor", level="L0")
    b = _ms_dump(ms, tmp_path / "b", DenseMlp(changed), task="tensor", level="L0")
    report = _compare(tmp_path, a, b).set_index("NPU Name")
    assert (report.index == report["Bench Name"]).all()
    assert report.loc["Cell.fc1.Dense.forward.0.output.0", "Accuracy Reached or Not"] == "Yes"
    assert report.loc["Cell.fc1.Dense.forward.0.parameters.weight", "Accuracy Reached or Not"] == "Yes"
    assert report.loc["Cell.fc2.Dense.forward.0.parameters.weight", "Accuracy Reached or Not"] == "No"
    assert _numeric(report.loc["Cell.fc2.Dense.forward.0.parameters.weight", "Cosine"]) == pytest.approx(-1.0)
    assert report.loc["Cell.fc2.Dense.forward.0.output.0", "Accuracy Reached or Not"] == "No"
