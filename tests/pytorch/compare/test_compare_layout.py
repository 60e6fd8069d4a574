"""Different parallel layouts: a real 2-rank tensor-parallel gloo run compared with a 1-rank run (`--layout`)."""
import json
import os
import sys

import pytest
import torch.nn.functional as F

from msprobe.cli import main
from msprobe.core.compare.layout import layout_pairs, load_group

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from parallel_jobs import float64_stats, run_jobs  # noqa: E402
from tp_job import full_model  # noqa: E402

LAYOUT = {"tensors": {
    "Functional.linear.0.forward.input.[12]": "Shard(0)",        # fc1 weight, bias: rows split
    "Functional.linear.0.forward.output.0": "Shard(-1)",
    "Functional.gelu.0.*.0": "Shard(-1)",
    "Functional.linear.1.forward.input.0": "Shard(-1)",
    "Functional.linear.1.forward.input.1": "Shard(1)",           # fc2 weight: columns split
    "Functional.linear.1.forward.output.0": "Partial",           # partial sums before the all_reduce
    "Distributed.all_reduce.0.forward.input.0": "Partial",
    "Functional.linear.1.backward.output.0": "Shard(-1)",
    "Functional.linear.1.backward.output.1": "Shard(1)",
    "Functional.linear.0.backward.input.0": "Shard(-1)",
    "Functional.linear.0.backward.output.[12]": "Shard(0)",
}}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """dump roots of a clean 2-rank TP run, a 2-rank TP run whose rank 1 computes its GELU shard wrongly,
    and a 1-rank run of the same model (the three jobs run at the same time)."""
    root = tmp_path_factory.mktemp("tp")
    specs = {"tp": ("2", "clean"), "tp_fault": ("2", "fault"), "single": ("1", "clean")}
    return {name: os.path.join(folder, "dump") for name, folder in run_jobs(root, "tp_job.py", specs).items()}


def _recombined_row(table, name):
    row = table.columns["name"].index(name)
    return table.columns["shape_key"][row], [table.columns[k][row] for k in ("max", "min", "mean", "norm")]


def test_recombined_shards_hold_the_whole_tensors_statistics(runs):
    (tag, npu_jsons, bench_json), = layout_pairs(runs["tp"], runs["single"], LAYOUT)
    assert tag == "_step0_rank0+1-rank0" and len(npu_jsons) == 2
    shard = json.loads(open(npu_jsons[0]).read())["data"]["Functional.linear.0.forward"]["output"][0]
    assert shard["shape"] == [6, 8]  # the premise: each rank holds half of the hidden dim
    table = load_group(npu_jsons, LAYOUT)
    fc1, fc2, x = full_model()  # the whole model, recomputed here in float64
    fc1, fc2, x = fc1.double(), fc2.double(), x.double()
    hidden = F.linear(x, fc1.weight, fc1.bias)
    act = F.gelu(hidden)
    partial = F.linear(act, fc2.weight)
    (partial + fc2.bias).pow(2).mean().backward()
    expected = {"Functional.linear.0.forward.input.1": fc1.weight, "Functional.linear.0.forward.input.2": fc1.bias,
                "Functional.linear.0.forward.output.0": hidden, "Functional.gelu.0.forward.output.0": act,
                "Functional.linear.1.forward.input.1": fc2.weight, "Functional.linear.0.backward.output.1": fc1.weight.grad,
                "Functional.linear.1.forward.input.0": act}
    for name, tensor in expected.items():
        shape, values = _recombined_row(table, name)
        assert shape == tuple(tensor.shape), name
        assert values == pytest.approx(float64_stats(tensor), rel=1e-5, abs=1e-6), name
    shape, values = _recombined_row(table, "Functional.linear.1.forward.output.0")  # Partial: only the Mean sums
    assert shape == (6, 8) and values[2] == pytest.approx(partial.mean().item(), rel=1e-5, abs=1e-7)
    assert all(v != v for k, v in enumerate(values) if k != 2)


def _compare(tmp_path, npu, bench, *extra):
    (tmp_path / "layout.json").write_text(json.dumps(LAYOUT))
    (tmp_path / "compare.json").write_text(json.dumps({"npu_path": npu, "bench_path": bench}))
    out = tmp_path / "out"
    assert main(["-f", "pytorch", "compare", "-i", str(tmp_path / "compare.json"), "-o", str(out), "-p", "1",
                 "--layout", str(tmp_path / "layout.json"), *extra]) == 0
    return json.loads((out / "job_summary.json").read_text()), out


def test_tp_run_compares_row_by_row_with_the_single_rank_run(runs, tmp_path):
    job, out = _compare(tmp_path, runs["tp"], runs["single"])
    pair, = job["pairs"]
    assert (pair["step"], pair["rank"]) == (0, 0)
    assert pair["counts"]["unmatched"] == 0 and pair["counts"]["suspicious"] == 0 and job["parted"] is None
    from openpyxl import load_workbook
    sheet = load_workbook(pair["report"], read_only=True)["Sheet"]
    rows = list(sheet.iter_rows(values_only=True))
    header, cells = rows[0], {row[0]: row for row in rows[1:]}
    fc1_out = cells["Functional.linear.0.forward.output.0"]
    assert fc1_out[header.index("NPU Tensor Shape")] == fc1_out[header.index("Bench Tensor Shape")] == "[6, 16]"


def test_a_fault_in_one_shard_is_found(runs, tmp_path):
    job, _ = _compare(tmp_path, runs["tp_fault"], runs["single"])
    parted = job["parted"]
    assert parted is not None and parted["call"] == "Functional.gelu.0.forward"
    assert parted["row_name"] == "Functional.gelu.0.forward.output.0" and (parted["step"], parted["rank"]) == (0, 0)


def test_without_the_layout_the_shards_do_not_pair(runs, tmp_path):
    (tmp_path / "compare.json").write_text(json.dumps({"npu_path": runs["tp"], "bench_path": runs["single"]}))
    out = tmp_path / "out"
    assert main(["-f", "pytorch", "compare", "-i", str(tmp_path / "compare.json"), "-o", str(out), "-p", "1"]) == 0
    job = json.loads((out / "job_summary.json").read_text())
    assert [p["rank"] for p in job["pairs"]] == [0]  # rank 1 has no counterpart, rank 0 holds only halves
