"""nan_analyze ordering rules on hand-built dumps: collectives order ranks, received is not origin."""
import json
import math

from msprobe.core.overflow.nan_analyze import analyze_job

NAN, INF = math.nan, math.inf


def _t(value):
    return {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": value, "Min": value,
            "Mean": value, "Norm": value}


def _call(inp, out):
    return {"input_args": [_t(inp)], "input_kwargs": {}, "output": [_t(out)]}


def _write(root, step, rank, entries):
    folder = root / f"step{step}" / f"rank{rank}"
    folder.mkdir(parents=True)
    (folder / "dump.json").write_text(json.dumps({"task": "statistics", "data": dict(entries)}))


AR0, AR1 = "Distributed.all_reduce.0.forward", "Distributed.all_reduce.1.forward"


def test_producer_before_a_collective_wins_over_a_lower_rank_after_it(tmp_path):
    # rank 0 makes its NaN after all_reduce.0 (dump position 1); rank 3 before it (dump position 2):
    # all_reduce.0 orders them, rank 3 is first although it is the higher rank and later in its file
    _write(tmp_path, 0, 0, [("Torch.add.0.forward", _call(1.0, 1.0)), (AR0, _call(1.0, 2.0)),
                            ("Torch.log.0.forward", _call(1.0, -INF)), (AR1, _call(-INF, -INF))])
    _write(tmp_path, 0, 3, [("Torch.add.0.forward", _call(1.0, 1.0)), ("Torch.mul.0.forward", _call(1.0, 1.0)),
                            ("Torch.div.0.forward", _call(1.0, INF)), (AR0, _call(INF, 2.0)),
                            (AR1, _call(1.0, -INF))])
    report = analyze_job(str(tmp_path))
    assert (report["origin"]["rank"], report["origin"]["call"]) == (3, "Torch.div.0.forward")
    assert report["concurrent"] == []


def test_producers_between_the_same_collectives_are_concurrent(tmp_path):
    for rank, api in ((1, "Torch.exp.0.forward"), (2, "Torch.pow.0.forward")):
        _write(tmp_path, 0, rank, [(AR0, _call(1.0, 2.0)), (api, _call(2.0, INF)), (AR1, _call(INF, INF))])
    report = analyze_job(str(tmp_path))
    assert report["origin"]["rank"] == 1 and report["origin"]["concurrent_with_others"] is True
    assert [(c["rank"], c["call"]) for c in report["concurrent"]] == [(2, "Torch.pow.0.forward")]


def test_collective_fed_finite_values_that_overflows_is_the_producer(tmp_path):
    for rank in range(2):
        _write(tmp_path, 0, rank, [("Torch.mul.0.forward", _call(1.0, 6e4)), (AR0, _call(6e4, INF))])
    report = analyze_job(str(tmp_path))
    assert report["collective_overflow"] is True
    assert (report["origin"]["rank"], report["origin"]["call"], report["origin"]["role"]) == (0, AR0, "producer")


def test_earlier_step_wins_and_a_nan_input_is_named_as_input(tmp_path):
    _write(tmp_path, 0, 1, [("Torch.add.0.forward", _call(NAN, NAN))])   # data already NaN
    _write(tmp_path, 1, 0, [("Torch.log.0.forward", _call(1.0, NAN))])
    report = analyze_job(str(tmp_path))
    origin = report["origin"]
    assert (origin["step"], origin["rank"], origin["role"]) == (0, 1, "input")


def test_ignored_minus_inf_is_not_an_origin(tmp_path):
    _write(tmp_path, 0, 0, [("Torch.masked_fill.0.forward", _call(1.0, -INF)), ("Torch.exp.0.forward", _call(1.0, INF))])
    report = analyze_job(str(tmp_path), ignore=["masked_fill:-inf"])
    assert report["origin"]["call"] == "Torch.exp.0.forward"
    assert analyze_job(str(tmp_path))["origin"]["call"] == "Torch.masked_fill.0.forward"
