"""`msprobe -f mindspore graph` on real MindSpore dumps: build, MindSpore vs MindSpore with an injected fault,
and MindSpore vs PyTorch (same weights) matched through a layer mapping."""
import json
import os

import numpy as np

from vis_helpers import advisor_suspect, load_vis, node_of_row, precision_indices, rank_dir, run_graph_cli

FAULT = "Cell.blocks.1.0.Dense.forward.0"


def _weights(seed=0):
    rng = np.random.RandomState(seed)
    shapes = [(8, 4), (8,), (8, 8), (8,), (8, 8), (8,), (2, 8), (2,)]
    return [(rng.randn(*s) * 0.4).astype(np.float32) for s in shapes]


def _ms_net(ms, weights):
    from mindspore import Parameter, Tensor, nn

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.embed = nn.Dense(4, 8)
            self.blocks = nn.SequentialCell([nn.SequentialCell([nn.Dense(8, 8), nn.ReLU()]) for _ in range(2)])
            self.head = nn.Dense(8, 2)

        def construct(self, x):
            return self.head(self.blocks(self.embed(x)))

    net = Net()
    dense = [net.embed, net.blocks[0][0], net.blocks[1][0], net.head]
    for layer, (w, b) in zip(dense, zip(weights[::2], weights[1::2])):
        layer.weight = Parameter(Tensor(w), name=layer.weight.name)
        layer.bias = Parameter(Tensor(b), name=layer.bias.name)
    return net


def _ms_dump(ms, directory, weights):
    from mindspore import Tensor, mint
    from msprobe.mindspore import PrecisionDebugger

    os.makedirs(directory, exist_ok=True)
    config = os.path.join(directory, "config.json")
    with open(config, "w") as handle:
        json.dump({"task": "statistics", "level": "mix", "dump_path": os.path.join(directory, "dump")}, handle)
    net = _ms_net(ms, weights)
    debugger = PrecisionDebugger(config_path=config)
    grad_fn = ms.value_and_grad(lambda x: mint.mean(mint.square(net(x))), None, net.trainable_params())
    debugger.start(net)
    grad_fn(Tensor(np.random.RandomState(3).randn(3, 4).astype(np.float32)))
    debugger.stop()
    debugger.step()
    debugger.close()
    return rank_dir(os.path.join(directory, "dump"))


def _pt_dump(directory, weights):
    import torch
    from msprobe.pytorch import PrecisionDebugger

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Linear(4, 8)
            self.layers = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
                                                for _ in range(2)])
            self.head = torch.nn.Linear(8, 2)

        def forward(self, x):
            return self.head(self.layers(self.embed(x)))

    net = Net()
    with torch.no_grad():
        for layer, (w, b) in zip([net.embed, net.layers[0][0], net.layers[1][0], net.head],
                                 zip(weights[::2], weights[1::2])):
            layer.weight.copy_(torch.from_numpy(w))
            layer.bias.copy_(torch.from_numpy(b))
    os.makedirs(directory, exist_ok=True)
    config = os.path.join(directory, "config.json")
    with open(config, "w") as handle:
        json.dump({"task": "statistics", "level": "mix", "dump_path": os.path.join(directory, "dump")}, handle)
    debugger = PrecisionDebugger(config_path=config, model=net)
    debugger.start()
    loss = net(torch.from_numpy(np.random.RandomState(3).randn(3, 4).astype(np.float32))).pow(2).mean()
    loss.backward()
    debugger.stop()
    debugger.step()
    debugger.close()
    return rank_dir(os.path.join(directory, "dump"))


def test_mindspore_build_and_fault_compare(tmp_path, ms):
    weights = _weights()
    good = _ms_dump(ms, str(tmp_path / "good"), weights)
    faulty = [w.copy() for w in weights]
    faulty[4] *= 8  # blocks.1's Dense weight
    bad = _ms_dump(ms, str(tmp_path / "bad"), faulty)
    code, files = run_graph_cli(tmp_path, good, None, framework="mindspore", name="build")
    nodes = load_vis(files[0])["node"]
    assert code == 0 and nodes[FAULT]["upnode"] == "Cell.blocks.1.SequentialCell.forward.0"
    assert nodes[FAULT]["input_data"][FAULT + ".input.0"]["type"] == "mindspore.Tensor"
    assert nodes["Cell.blocks.SequentialCell.backward.0"]["upnode"] == "DefaultModel"
    code, files = run_graph_cli(tmp_path, bad, good, framework="mindspore", name="cmp")
    assert code == 0
    vis = load_vis(files[0])
    indices = precision_indices(vis)
    suspect_node = node_of_row(vis, advisor_suspect(bad, good))  # compare's advisor, on the same dumps
    assert suspect_node == FAULT or suspect_node.startswith("Cell.blocks.1.") or FAULT in vis["NPU"]["node"][
        suspect_node]["upnode"]
    assert [k for k, x in indices.items() if x >= 0.8] == [suspect_node]
    for node_id in ("Cell.embed.Dense.forward.0", "Cell.blocks.0.SequentialCell.forward.0",
                    "Primitive.matmul.MatMul.1.forward"):
        assert indices[node_id] < 0.2


def test_mindspore_vs_pytorch_with_layer_mapping(tmp_path, ms):
    weights = _weights()
    ms_dir = _ms_dump(ms, str(tmp_path / "ms"), weights)
    pt_dir = _pt_dump(str(tmp_path / "pt"), weights)
    mapping = tmp_path / "layer_mapping.yaml"
    mapping.write_text("TopLayer:\n  blocks: layers\n")
    _, plain = run_graph_cli(tmp_path, ms_dir, pt_dir, framework="mindspore", name="plain")
    assert not load_vis(plain[0])["NPU"]["node"][FAULT]["matched_node_link"]
    code, files = run_graph_cli(tmp_path, ms_dir, pt_dir, "-lm", str(mapping), framework="mindspore", name="lm")
    assert code == 0
    nodes = load_vis(files[0])["NPU"]["node"]
    for cell, module in ((FAULT, "Module.layers.1.0.Linear.forward.0"),
                         ("Cell.embed.Dense.forward.0", "Module.embed.Linear.forward.0"),
                         ("Cell.blocks.SequentialCell.forward.0", "Module.layers.Sequential.forward.0"),
                         ("Cell.head.Dense.backward.0", "Module.head.Linear.backward.0")):
        assert nodes[cell]["matched_node_link"][-1] == module
        # same weights and input in both frameworks: float32 rounding only, within the dtype tolerance
        assert nodes[cell]["data"]["precision_index"] < 0.2
