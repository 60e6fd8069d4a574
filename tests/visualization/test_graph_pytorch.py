"""`msprobe -f pytorch graph` on real PyTorch dumps: tree building, compare modes, precision index,
options (-f, -lm, -oc, -cs), layouts and errors."""
import json
import os
import shutil

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from graph_faults import FAULT_BLOCK
from vis_helpers import (Blocks, advisor_suspect, dump, load_vis, make_model, node_of_row, precision_indices,
                         rank_dir, run_graph_cli)

FAULT_MODULE = f"Module.blocks.{FAULT_BLOCK}.0.Linear.forward.0"
BEFORE_FAULT = ["Module.embed.Linear.forward.0", "Module.blocks.0.Sequential.forward.0",
                "Module.blocks.1.Sequential.forward.0", "Functional.linear.1.forward", "Functional.relu.1.forward"]


def _read(directory, name):
    with open(os.path.join(directory, name)) as handle:
        return json.load(handle)


def _index(vis, node_id):
    return vis["NPU"]["node"][node_id]["data"].get("precision_index")


def test_build_mode_tree_matches_construct_json(tmp_path, pt_dumps):
    directory = rank_dir(pt_dumps[("statistics", "good")])
    code, files = run_graph_cli(tmp_path, directory)
    assert code == 0 and len(files) == 1 and os.path.basename(files[0]).startswith("build_")
    vis = load_vis(files[0])
    assert vis["root"] == "DefaultModel" and vis["MicroSteps"] == 1 and vis["OverflowCheck"] is False
    nodes = vis["node"]
    construct = _read(directory, "construct.json")
    names = set(construct) | {v for v in construct.values() if v}
    collections = {n for n in nodes if n.startswith("Apis_Between_Modules.")}
    assert set(nodes) == names | collections | {"DefaultModel"}
    for node_id, parent in construct.items():  # every parent link of construct.json is in the tree
        upnode = nodes[node_id]["upnode"]
        expected = parent or "DefaultModel"
        assert upnode == expected or upnode in collections and nodes[upnode]["upnode"] == "DefaultModel"
    for node_id, node in nodes.items():
        for child in node["subnodes"]:
            assert nodes[child]["upnode"] == node_id
    # optimizer.step() inside start/stop: 'optimizer' becomes a container (1.2.1 crashes here)
    assert nodes["optimizer"]["node_type"] == 0 and nodes["optimizer"]["subnodes"][0] == "Tensor.add_.0.forward"
    # the loss APIs between the forward and backward passes are grouped
    assert nodes["Apis_Between_Modules.0"]["node_type"] == 9
    assert nodes["Apis_Between_Modules.0"]["subnodes"][:2] == ["Tensor.pow.0.forward", "Tensor.mean.0.forward"]
    # statistics are the dump's, as strings
    dump_json = _read(directory, "dump.json")["data"]
    out = dump_json["Functional.linear.1.forward"]["output"][0]
    stat = nodes["Functional.linear.1.forward"]["output_data"]["Functional.linear.1.forward.output.0"]
    assert stat["shape"] == str(out["shape"]) and float(stat["Max"]) == pytest.approx(out["Max"], abs=1e-6)
    assert stat["dtype"] == "torch.float32" and stat["type"] == "torch.Tensor"
    # simplified stacks: one line; a module's line calls it by attribute name
    assert len(nodes[FAULT_MODULE]["stack_info"]) == 1
    assert nodes["Module.embed.Linear.forward.0"]["stack_info"][0].count("self.embed(") == 1


def test_complete_stack_keeps_stack_json(tmp_path, pt_dumps):
    directory = rank_dir(pt_dumps[("statistics", "good")])
    code, files = run_graph_cli(tmp_path, directory, None, "-cs")
    assert code == 0
    stacks = _read(directory, "stack.json")
    nodes = load_vis(files[0])["node"]
    assert nodes["Functional.linear.1.forward"]["stack_info"] == stacks["Functional.linear.1.forward"]
    assert len(stacks["Functional.linear.1.forward"]) > 1


def test_statistics_compare_worst_node_is_the_advisors_suspect(tmp_path, pt_dumps):
    bad, good = rank_dir(pt_dumps[("statistics", "bad")]), rank_dir(pt_dumps[("statistics", "good")])
    code, files = run_graph_cli(tmp_path, bad, good)
    assert code == 0 and os.path.basename(files[0]).startswith("compare_")
    vis = load_vis(files[0])
    assert vis["task"] == "summary" and isinstance(vis["ToolTip"], str) and "Max diff" in json.loads(vis["ToolTip"])
    assert set(vis["Colors"]) == {"#FFFCF3", "#FFEDBE", "#FFDC7F", "#FFC62E", "#FF704D", "#C7C7C7"}
    assert "suspect" in vis["Colors"]["#FF704D"]["description"]
    indices = precision_indices(vis)
    # the darkest node is the one holding the row compare's advisor names, and no other node is that dark
    suspect_node = node_of_row(vis, advisor_suspect(bad, good))
    assert suspect_node.startswith(f"Module.blocks.{FAULT_BLOCK}.")
    assert indices[suspect_node] == 1.0 and [k for k, x in indices.items() if x >= 0.8] == [suspect_node]
    for node_id in BEFORE_FAULT:  # identical weights and data before the fault: within tolerance
        assert indices[node_id] < 0.2
    # after the fault every call inherits the difference: a consequence, not a second suspect
    assert 0.4 <= indices["Module.blocks.3.1.ReLU.forward.0"] <= 0.6
    stat = vis["NPU"]["node"][FAULT_MODULE]["output_data"][FAULT_MODULE + ".output.0"]
    assert stat["MaxRelativeErr"].endswith("%") and isinstance(stat["Max diff"], float)
    link = vis["NPU"]["node"][FAULT_MODULE]["matched_node_link"]
    assert link == ["DefaultModel", "Module.blocks.Sequential.forward.0", "Module.blocks.2.Sequential.forward.0",
                    FAULT_MODULE]


def test_md5_compare_marks_different_nodes(tmp_path, pt_dumps):
    code, files = run_graph_cli(tmp_path, rank_dir(pt_dumps[("md5", "bad")]), rank_dir(pt_dumps[("md5", "good")]))
    assert code == 0
    vis = load_vis(files[0])
    nodes = vis["NPU"]["node"]
    assert vis["task"] == "md5" and vis["Colors"]["#FF704D"]["value"] == [0, 0]
    assert nodes[FAULT_MODULE]["data"] == {"precision_index": 0, "Result": "Different"}
    for node_id in BEFORE_FAULT:
        assert nodes[node_id]["data"] == {"precision_index": 1, "Result": "pass"}


def _load_pt(directory, name):
    return torch.load(os.path.join(directory, "dump_tensor_data", name), weights_only=True).double().numpy()


def _thousandth(npu, bench):
    relative = np.abs(npu - bench) / np.maximum(np.abs(bench), np.finfo(np.float64).eps)
    return float(np.count_nonzero(relative < 0.001) / relative.size)


def test_tensor_compare_worst_node_is_the_advisors_suspect(tmp_path, pt_dumps):
    bad, good = rank_dir(pt_dumps[("tensor", "bad")]), rank_dir(pt_dumps[("tensor", "good")])
    code, files = run_graph_cli(tmp_path, bad, good)
    assert code == 0
    vis = load_vis(files[0])
    assert vis["task"] == "all" and vis["Colors"]["#FF704D"]["value"] == [0.2, 1]
    nodes = vis["NPU"]["node"]
    indices = precision_indices(vis)
    suspect_node = node_of_row(vis, advisor_suspect(bad, good))
    assert indices[suspect_node] == 1.0 and [k for k, x in indices.items() if x >= 0.2] == [suspect_node]
    # the metric cells stay 1.2.1's, recomputed here from the tensor files
    sequential = f"Module.blocks.{FAULT_BLOCK}.Sequential.forward.0"
    npu_data = _read(bad, "dump.json")["data"][sequential]
    bench_data = _read(good, "dump.json")["data"][sequential]
    out_ratio = _thousandth(_load_pt(bad, npu_data["output"][0]["data_name"]),
                            _load_pt(good, bench_data["output"][0]["data_name"]))
    metrics = nodes[sequential]["output_data"][sequential + ".output.0"]
    assert metrics["One Thousandth Err Ratio"] == pytest.approx(out_ratio)
    for node_id in BEFORE_FAULT:
        assert indices[node_id] < 0.05


class _RenamedBlocks(Blocks):
    """The same model with `blocks` renamed to `layers` (what a layer mapping fixes)."""

    def __init__(self, n_blocks=4):
        super().__init__(n_blocks)
        self.layers = self.blocks
        del self.blocks

    def forward(self, x):
        return self.head(self.layers(self.embed(x)))


def test_layer_mapping_matches_renamed_layers(tmp_path):
    npu = dump(str(tmp_path / "npu"), make_model(), optimizer=False)
    torch.manual_seed(0)
    bench = dump(str(tmp_path / "bench"), _RenamedBlocks(), optimizer=False)
    _, plain = run_graph_cli(tmp_path, rank_dir(npu), rank_dir(bench), name="plain")
    unmatched = [k for k, v in load_vis(plain[0])["NPU"]["node"].items() if not v["matched_node_link"]]
    assert FAULT_MODULE in unmatched
    mapping = tmp_path / "mapping.yaml"
    mapping.write_text("TopLayer:\n  blocks: layers\n")
    code, mapped = run_graph_cli(tmp_path, rank_dir(npu), rank_dir(bench), "-lm", str(mapping), name="mapped")
    assert code == 0
    nodes = load_vis(mapped[0])["NPU"]["node"]
    assert all(v["matched_node_link"] for v in nodes.values())
    assert nodes[FAULT_MODULE]["matched_node_link"][-1] == f"Module.layers.{FAULT_BLOCK}.0.Linear.forward.0"
    assert nodes[FAULT_MODULE]["data"]["precision_index"] == 0.0  # same weights: identical numbers


def test_fuzzy_match_ignores_shifted_call_counters(tmp_path):
    bench = dump(str(tmp_path / "bench"), make_model(), optimizer=False)
    npu = dump(str(tmp_path / "npu"), make_model(), optimizer=False, extra_input=lambda x: F.relu(x) - F.relu(-x))
    _, plain = run_graph_cli(tmp_path, rank_dir(npu), rank_dir(bench), name="plain")
    nodes = load_vis(plain[0])["NPU"]["node"]
    assert not nodes["Functional.relu.2.forward"]["matched_node_link"]  # counters shifted by two
    code, fuzzy = run_graph_cli(tmp_path, rank_dir(npu), rank_dir(bench), "-f", name="fuzzy")
    assert code == 0
    nodes = load_vis(fuzzy[0])["NPU"]["node"]
    assert nodes["Functional.relu.2.forward"]["matched_node_link"][-1] == "Functional.relu.0.forward"
    inside = [k for k in nodes if k.startswith(("Module.", "Functional.linear"))]
    assert all(nodes[k]["matched_node_link"] for k in inside)


def test_overflow_levels_from_an_inf_weight(tmp_path):
    model = make_model()
    with torch.no_grad():
        model.blocks[1][0].weight[0, 0] = float("inf")
    directory = rank_dir(dump(str(tmp_path / "d"), model, optimizer=False))
    code, files = run_graph_cli(tmp_path, directory, None, "-oc")
    assert code == 0
    vis = load_vis(files[0])
    nodes = vis["node"]
    assert vis["OverflowCheck"] is True
    assert nodes["Module.blocks.1.0.Linear.forward.0"]["data"]["overflow_level"] == "critical"
    assert nodes["Functional.linear.2.forward"]["data"]["overflow_level"] == "high"  # the inf weight is an input
    assert nodes["Module.blocks.2.Sequential.forward.0"]["data"]["overflow_level"] == "high"
    assert "overflow_level" not in nodes["Module.blocks.0.Sequential.forward.0"]["data"]


def test_micro_steps_split_the_root(tmp_path):
    directory = rank_dir(dump(str(tmp_path / "d"), make_model(), micro_batches=2))
    code, files = run_graph_cli(tmp_path, directory)
    nodes = load_vis(files[0])["node"]
    assert code == 0 and load_vis(files[0])["MicroSteps"] == 2
    assert nodes["Module.embed.Linear.forward.0"]["micro_step_id"] == 0
    assert nodes["Module.embed.Linear.forward.1"]["micro_step_id"] == 1
    assert "micro_step_id" not in nodes["Functional.linear.0.forward"]


def test_l1_dump_lists_apis_under_the_root(tmp_path):
    directory = rank_dir(dump(str(tmp_path / "d"), make_model(), level="L1", optimizer=False))
    code, files = run_graph_cli(tmp_path, directory)
    nodes = load_vis(files[0])["node"]
    assert code == 0 and nodes["DefaultModel"]["subnodes"][0] == "Apis_Between_Modules.0"
    assert "Functional.linear.3.forward" in nodes["Apis_Between_Modules.0"]["subnodes"]


def _copy_as(source, target):
    shutil.copytree(source, target)


def test_step_and_rank_layouts_name_their_files(tmp_path, pt_dumps):
    good, bad = rank_dir(pt_dumps[("statistics", "good")]), rank_dir(pt_dumps[("statistics", "bad")])
    for side, source in (("npu", bad), ("bench", good)):
        for step in (0, 1):
            for rank in (0, 1):
                _copy_as(source, str(tmp_path / side / f"step{step}" / f"rank{rank}"))
    code, files = run_graph_cli(tmp_path, tmp_path / "npu", tmp_path / "bench", name="steps")
    names = [os.path.basename(f).rsplit("_", 1)[0] for f in files]
    assert code == 0 and names == ["compare_step0_rank0", "compare_step0_rank1", "compare_step1_rank0",
                                   "compare_step1_rank1"]
    assert len({os.path.basename(f).rsplit("_", 1)[1] for f in files}) == 1  # one timestamp per run
    code, files = run_graph_cli(tmp_path, tmp_path / "npu" / "step0", None, name="ranks")
    assert code == 0 and [os.path.basename(f).rsplit("_", 1)[0] for f in files] == ["build_rank0", "build_rank1"]
    # a non-distributed dump's rank folder is literally 'rank'
    code, files = run_graph_cli(tmp_path, pt_dumps[("statistics", "good")] + "/step0", None, name="plain_rank")
    assert code == 0 and os.path.basename(files[0]).startswith("build_rank_")


@pytest.mark.parametrize("case", ["empty", "layout", "ranks", "task", "no_npu_path", "bad_yaml"])
def test_bad_inputs_fail_with_one_line(tmp_path, pt_dumps, capsys, case):
    good = rank_dir(pt_dumps[("statistics", "good")])
    flags = []
    if case == "empty":
        (tmp_path / "empty").mkdir()
        npu, bench = tmp_path / "empty", None
    elif case == "layout":
        npu, bench = good, pt_dumps[("statistics", "bad")] + "/step0"
    elif case == "ranks":
        _copy_as(good, str(tmp_path / "a" / "rank0"))
        _copy_as(good, str(tmp_path / "b" / "rank1"))
        npu, bench = tmp_path / "a", tmp_path / "b"
    elif case == "task":
        npu, bench = good, rank_dir(pt_dumps[("md5", "good")])
    elif case == "no_npu_path":
        npu, bench = tmp_path / "missing", None
    else:
        (tmp_path / "m.yaml").write_text("TopLayer: [unclosed\n")
        npu, bench, flags = good, rank_dir(pt_dumps[("statistics", "bad")]), ["-lm", str(tmp_path / "m.yaml")]
    code, files = run_graph_cli(tmp_path, npu, bench, *flags, name="err")
    captured = capsys.readouterr()
    errors = [line for line in (captured.out + captured.err).splitlines() if "[ERROR]" in line]
    assert code == 1 and files == [] and len(errors) == 1
    assert "Traceback" not in captured.out + captured.err
