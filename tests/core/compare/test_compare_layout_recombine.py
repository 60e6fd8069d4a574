"""layout.py: placements parsed, shard statistics recombined (against numpy on the whole array), bad layouts refused."""
import json
import math

import numpy as np
import pytest

from msprobe.cli import main
from msprobe.core.compare.layout import Placement, load_layout, parse_placement, recombine_tables
from msprobe.core.errors import CompareError, ConfigError
from msprobe.core.io.load import table_from_dump


def _desc(array):
    array = np.asarray(array, dtype=np.float64)
    if array.size == 0:
        return {"type": "torch.Tensor", "dtype": "torch.float32", "shape": list(array.shape),
                "Max": None, "Min": None, "Mean": None, "Norm": None}
    return {"type": "torch.Tensor", "dtype": "torch.float32", "shape": list(array.shape), "Max": float(array.max()),
            "Min": float(array.min()), "Mean": float(array.mean()), "Norm": float(np.sqrt((array ** 2).sum()))}


def _table(rank, tensors):
    data = {"Functional.op.0.forward": {"input_args": [_desc(t) for t in tensors[:-1]], "output": [_desc(tensors[-1])]}}
    return table_from_dump({"task": "statistics", "level": "L1", "data": data}, f"/job/step0/rank{rank}/dump.json")


def _row(table, name):
    row = table.columns["name"].index(name)
    return table.columns["shape_key"][row], [table.columns[k][row] for k in ("max", "min", "mean", "norm")], \
        table.columns["absent"][row]


@pytest.mark.parametrize("text, expected", [
    ("Shard(0)", Placement("shard", 0)), ("shard( -1 )", Placement("shard", -1)), ("Replicate", Placement("replicate")),
    ("Replicate()", Placement("replicate")), ("PARTIAL", Placement("partial"))])
def test_placements_are_dtensor_words(text, expected):
    assert parse_placement(text) == expected


@pytest.mark.parametrize("text", ["Shard", "Shard(x)", "Replicate(0)", "__import__('os')", "Partial(1)"])
def test_other_placements_are_refused(text):
    with pytest.raises(ConfigError):
        parse_placement(text)


def test_shards_recombine_to_the_whole_arrays_statistics():
    rng = np.random.default_rng(5)
    whole = rng.normal(size=(3, 10)) * 4
    parts = [whole[:, :4], whole[:, 4:]]  # uneven shards: the Mean is weighted by element counts
    layout = load_layout({"tensors": {"*.input.0": "Shard(1)", "*.output.0": "Partial"}})
    summands = [rng.normal(size=(2, 2)) for _ in range(2)]
    merged = recombine_tables([_table(r, [parts[r], summands[r]]) for r in range(2)], layout)
    shape, values, absent = _row(merged, "Functional.op.0.forward.input.0")
    assert shape == (3, 10) and absent == 0
    assert values == pytest.approx([whole.max(), whole.min(), whole.mean(), math.sqrt((whole ** 2).sum())], rel=1e-12)
    shape, values, absent = _row(merged, "Functional.op.0.forward.output.0")
    assert shape == (2, 2) and values[2] == pytest.approx((summands[0] + summands[1]).mean(), rel=1e-12)
    assert absent == 1 | 2 | 8 and all(math.isnan(values[k]) for k in (0, 1, 3))


def test_a_nan_shard_makes_the_whole_max_nan_and_empty_shards_keep_their_absence():
    layout = load_layout({"tensors": {"*": "Shard(0)"}})
    nan_part = np.array([1.0, float("nan")])
    tables = [_table(0, [np.array([1.0, 2.0]), np.zeros((0, 3))]), _table(1, [nan_part, np.zeros((0, 3))])]
    tables[1].columns["max"][0] = tables[1].columns["min"][0] = float("nan")
    merged = recombine_tables(tables, layout)
    assert math.isnan(_row(merged, "Functional.op.0.forward.input.0")[1][0])
    shape, _, absent = _row(merged, "Functional.op.0.forward.output.0")
    assert shape == (0, 3) and absent == 15


def test_shards_that_do_not_fit_their_placement_are_not_compared():
    layout = load_layout({"tensors": {"*.input.0": "Shard(0)", "*.output.0": "Shard(3)"}})
    tables = [_table(0, [np.ones((2, 3)), np.ones(2)]), _table(1, [np.ones((2, 4)), np.ones(2)])]
    merged = recombine_tables(tables, layout)
    assert _row(merged, "Functional.op.0.forward.input.0")[2] == 15   # (2, 3) and (2, 4) along dim 0
    assert _row(merged, "Functional.op.0.forward.output.0")[2] == 15  # 1-d tensor has no dim 3


def test_replicated_rows_keep_the_first_rank_and_tensor_dumps_are_refused():
    layout = load_layout({"tensors": {}})
    tables = [_table(0, [np.ones(2), np.ones(2)]), _table(1, [np.ones(2) * 2, np.ones(2)])]
    assert _row(recombine_tables(tables, layout), "Functional.op.0.forward.input.0")[1][0] == 1.0
    tables[0].header["task"] = "tensor"
    with pytest.raises(CompareError, match="statistics dumps only"):
        recombine_tables(tables, layout)


@pytest.mark.parametrize("layout", [{"tensors": ["Shard(0)"]}, {"groups": [[0, 1], [1, 2]], "tensors": {}},
                                    {"groups": [[0, "a"]], "tensors": {}}, {"tensors": {"*": "Shard(x)"}}])
def test_bad_layouts_are_one_error_line(layout, tmp_path, caplog):
    (tmp_path / "layout.json").write_text(json.dumps(layout))
    for side in ("npu", "bench"):
        rank = tmp_path / side / "step0" / "rank0"
        rank.mkdir(parents=True)
        (rank / "dump.json").write_text(json.dumps({"task": "statistics", "data": {}}))
    (tmp_path / "compare.json").write_text(json.dumps({"npu_path": str(tmp_path / "npu"),
                                                      "bench_path": str(tmp_path / "bench")}))
    code = main(["-f", "pytorch", "compare", "-i", str(tmp_path / "compare.json"), "-o", str(tmp_path / "out"),
                 "--layout", str(tmp_path / "layout.json")])
    errors = [r for r in caplog.records if r.levelname == "ERROR"]
    assert code == 1 and len(errors) == 1 and "layout" in errors[0].getMessage() and not errors[0].exc_info


def test_groups_of_ranks_pair_with_bench_ranks_in_order(tmp_path):
    from msprobe.core.compare.layout import layout_pairs

    def dump(root, rank, array):
        folder = tmp_path / root / "step3" / f"rank{rank}"
        folder.mkdir(parents=True)
        data = {"Functional.op.0.forward": {"input_args": [_desc(array)], "output": [_desc(array)]}}
        (folder / "dump.json").write_text(json.dumps({"task": "statistics", "level": "L1", "data": data}))

    wholes = [np.arange(8.0).reshape(2, 4), -np.arange(8.0).reshape(2, 4)]  # one per data-parallel replica
    for group, ranks in enumerate([[0, 2], [1, 3]]):  # tensor-parallel groups that interleave ranks
        for shard, rank in enumerate(ranks):
            dump("npu", rank, wholes[group][:, 2 * shard:2 * shard + 2])
        dump("bench", group, wholes[group])
    layout = {"groups": [[0, 2], [1, 3]], "tensors": {"*": "Shard(1)"}}
    pairs = layout_pairs(str(tmp_path / "npu"), str(tmp_path / "bench"), layout)
    assert [(tag, [p.split("/")[-2] for p in npu], bench.split("/")[-2]) for tag, npu, bench in pairs] == [
        ("_step3_rank0+2-rank0", ["rank0", "rank2"], "rank0"), ("_step3_rank1+3-rank1", ["rank1", "rank3"], "rank1")]
    (tmp_path / "compare.json").write_text(json.dumps({"npu_path": str(tmp_path / "npu"),
                                                      "bench_path": str(tmp_path / "bench")}))
    (tmp_path / "layout.json").write_text(json.dumps(layout))
    out = tmp_path / "out"
    assert main(["-f", "pytorch", "compare", "-i", str(tmp_path / "compare.json"), "-o", str(out), "-p", "1",
                 "--layout", str(tmp_path / "layout.json")]) == 0
    job = json.loads((out / "job_summary.json").read_text())
    assert [(p["step"], p["rank"]) for p in job["pairs"]] == [(3, 0), (3, 1)]
    assert job["totals"]["suspicious"] == 0 and job["totals"]["unmatched"] == 0 and job["parted"] is None
    import openpyxl

    rows = list(openpyxl.load_workbook(job["pairs"][1]["report"], read_only=True).active.iter_rows(values_only=True))
    header, output = rows[0], rows[2]
    cell = dict(zip(header, output))
    assert cell["NPU Name"] == "Functional.op.0.forward.output.0" and cell["NPU Tensor Shape"] == "[2, 4]"
    assert (cell["NPU max"], cell["NPU min"], cell["NPU mean"]) == (0.0, -7.0, -3.5)  # min from rank 3's shard
