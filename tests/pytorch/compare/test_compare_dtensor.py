"""DTensor dumps: a rank's DTensor rows describe its local shard, the placements go to layout.json, and
`compare --layout auto` recombines a real 2-process parallelize_module run (gloo) for a 1-process run."""
import json
import os
import shutil
import sys

import pytest
import torch

from msprobe.cli import main
from msprobe.core.compare.layout import layout_pairs, load_group
from msprobe.core.io.load import load_dump

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from parallel_jobs import float64_stats, run_jobs  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
STATS = ("Max", "Min", "Mean", "Norm")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Roots of a clean 2-rank parallelize_module run, one whose rank 1 scales its GELU shard, a 1-rank run
    of the same model, and a clean 2-rank run with the tensor task (the gloo jobs run at the same time)."""
    root = tmp_path_factory.mktemp("dtensor")
    specs = {"tp": ("2", "clean"), "tp_fault": ("2", "fault"), "single": ("1", "clean"), "tp_tensor": ("2", "tensor")}
    return run_jobs(root, "dtensor_job.py", specs)


@pytest.mark.parametrize("rank", [0, 1])
def test_dtensor_rows_hold_the_local_shards_shape_and_statistics(runs, rank):
    folder = os.path.join(runs["tp"], "dump", "step0", f"rank{rank}")
    data = json.loads(open(os.path.join(folder, "dump.json")).read())["data"]
    local = torch.load(os.path.join(runs["tp"], f"local{rank}.pt"))
    norms = set()
    for module in ("fc1", "fc2"):
        for param in ("weight", "bias"):
            rows = {"parameter": data[f"Module.{module}.Linear.forward.0"]["parameters"][param],
                    "gradient": data[f"Module.{module}.Linear.parameters_grad"][param][0]}
            tensors = {"parameter": local["params"][f"{module}.{param}"], "gradient": local["grads"][f"{module}.{param}"]}
            for what, row in rows.items():
                expected = tensors[what]
                assert row["shape"] == list(expected.shape), (module, param, what)
                assert [row[k] for k in STATS] == pytest.approx(float64_stats(expected), rel=1e-5, abs=1e-7), \
                    (module, param, what)
                norms.add(round(row["Norm"], 6))
    assert len(norms) == 8  # eight different tensors, eight different norms (none taken from another tensor)
    assert data["Module.fc1.Linear.forward.0"]["parameters"]["weight"]["shape"] == [8, 8]  # local, not [16, 8]


def test_placements_are_recorded_beside_dump_json(runs):
    folder = os.path.join(runs["tp"], "dump", "step0", "rank1")
    recorded = json.loads(open(os.path.join(folder, "layout.json")).read())
    assert recorded["meshes"] == [[0, 1]]
    fc1, fc2 = recorded["data"]["Module.fc1.Linear.forward.0"], recorded["data"]["Module.fc2.Linear.forward.0"]
    assert fc1["parameters"]["weight"] == {"type": "placement", "value": "Shard(0)", "mesh": [0, 1]}
    assert fc2["parameters"]["weight"]["value"] == "Shard(1)" and fc2["parameters"]["bias"]["value"] == "Replicate"
    assert recorded["data"]["Functional.linear.1.forward"]["output"][0]["value"] == "Partial"
    # dump.json keeps 1.2.1's descriptor keys only
    entry = json.loads(open(os.path.join(folder, "dump.json")).read())["data"]["Module.fc1.Linear.forward.0"]
    assert set(entry["parameters"]["weight"]) == {"type", "dtype", "shape", "requires_grad", *STATS}


def test_auto_layout_recombines_the_shards_into_the_single_rank_tensors(runs):
    (tag, npu_jsons, bench_json), = layout_pairs(os.path.join(runs["tp"], "dump"),
                                                 os.path.join(runs["single"], "dump"), "auto")
    assert tag == "_step0_rank0+1-rank0"
    table, bench = load_group(npu_jsons, "auto"), load_dump(bench_json)
    bench_rows = {name: i for i, name in enumerate(bench.columns["name"])}
    checked = 0
    for row, name in enumerate(table.columns["name"]):
        if table.columns["kind"][row] != "tensor" or name.startswith("Functional.linear.1.forward.output"):
            continue  # the Partial output: only its Mean recombines (checked below)
        other = bench_rows[name]
        assert table.columns["shape_key"][row] == bench.columns["shape_key"][other], name
        for key in ("max", "min", "mean", "norm"):
            assert table.columns[key][row] == pytest.approx(bench.columns[key][other], rel=1e-4, abs=1e-6), (name, key)
        checked += 1
    assert checked >= 40
    row, other = table.columns["name"].index("Functional.linear.1.forward.output.0"), \
        bench_rows["Functional.linear.1.forward.output.0"]
    assert table.columns["mean"][row] == pytest.approx(bench.columns["mean"][other], rel=1e-4, abs=1e-7)


def _run_compare(tmp_path, npu_root, bench_root):
    (tmp_path / "compare.json").write_text(json.dumps({"npu_path": os.path.join(npu_root, "dump"),
                                                       "bench_path": os.path.join(bench_root, "dump")}))
    out = tmp_path / "out"
    code = main(["-f", "pytorch", "compare", "-i", str(tmp_path / "compare.json"), "-o", str(out), "-p", "1",
                 "--layout", "auto"])
    return code, out


def test_compare_layout_auto_finds_no_difference_in_a_clean_run(runs, tmp_path):
    code, out = _run_compare(tmp_path, runs["tp"], runs["single"])
    assert code == 0
    job = json.loads((out / "job_summary.json").read_text())
    pair, = job["pairs"]
    assert pair["counts"]["unmatched"] == 0 and pair["counts"]["suspicious"] == 0 and job["parted"] is None


def test_compare_layout_auto_finds_a_fault_in_one_shard(runs, tmp_path):
    code, out = _run_compare(tmp_path, runs["tp_fault"], runs["single"])
    assert code == 0
    parted = json.loads((out / "job_summary.json").read_text())["parted"]
    # rank 1 scales its GELU shard after the GELU: the next call's input is the first to differ
    assert parted is not None and parted["call"] == "Functional.linear.1.forward"
    assert parted["row_name"] == "Functional.linear.1.forward.input.0"


def test_compare_layout_auto_without_recorded_placements_is_an_error(runs, tmp_path, capsys):
    copy = tmp_path / "copy"
    shutil.copytree(os.path.join(runs["tp"], "dump"), copy / "dump")
    for rank in (0, 1):
        os.remove(copy / "dump" / "step0" / f"rank{rank}" / "layout.json")
    code, _ = _run_compare(tmp_path, str(copy), runs["single"])
    assert code != 0
    captured = capsys.readouterr()
    assert "[ERROR]" in captured.out + captured.err and "layout.json" in captured.out + captured.err


def test_recorded_placements_come_before_a_layout_files_patterns(runs):
    (_, npu_jsons, _), = layout_pairs(os.path.join(runs["tp"], "dump"), os.path.join(runs["single"], "dump"),
                                      {"tensors": {"*": "Shard(0)"}})
    table = load_group(npu_jsons, {"tensors": {"*": "Shard(0)"}})
    shape_of = dict(zip(table.columns["name"], table.columns["shape_key"]))
    assert shape_of["Module.fc2.Linear.forward.0.parameters.weight"] == (8, 16)  # recorded Shard(1) wins
    assert shape_of["Tensor.pow.0.forward.input.0"] == (12, 8)  # a plain tensor: the file's pattern applies


def test_a_recorded_placement_that_cannot_be_recombined_is_left_out(runs, tmp_path):
    copy = tmp_path / "dump"
    shutil.copytree(os.path.join(runs["tp"], "dump"), copy)
    for rank in (0, 1):
        path = copy / "step0" / f"rank{rank}" / "layout.json"
        recorded = json.loads(path.read_text())
        recorded["data"]["Module.fc1.Linear.forward.0"]["parameters"]["weight"]["value"] = "Partial(max)"
        path.write_text(json.dumps(recorded))
    (_, npu_jsons, _), = layout_pairs(str(copy), os.path.join(runs["single"], "dump"), "auto")
    table = load_group(npu_jsons, "auto")
    row = table.columns["name"].index("Module.fc1.Linear.forward.0.parameters.weight")
    assert table.columns["absent"][row] == 15 and table.columns["norm"][row] != table.columns["norm"][row]


@pytest.mark.parametrize("rank", [0, 1])
def test_the_tensor_task_saves_a_dtensors_local_shard(runs, rank):
    folder = os.path.join(runs["tp_tensor"], "dump", "step0", f"rank{rank}")
    data = json.loads(open(os.path.join(folder, "dump.json")).read())["data"]
    local = torch.load(os.path.join(runs["tp_tensor"], f"local{rank}.pt"))
    for module, param in (("fc1", "weight"), ("fc2", "weight"), ("fc2", "bias")):
        row = data[f"Module.{module}.Linear.forward.0"]["parameters"][param]
        saved = torch.load(os.path.join(folder, "dump_tensor_data", row["data_name"]))
        assert type(saved) is torch.Tensor and torch.equal(saved, local["params"][f"{module}.{param}"])
        grad = data[f"Module.{module}.Linear.parameters_grad"][param][0]
        saved = torch.load(os.path.join(folder, "dump_tensor_data", grad["data_name"]))
        assert torch.equal(saved, local["grads"][f"{module}.{param}"]), (module, param)
