"""The anomaly rules, the divergence rule and the monitor config on hand-made series."""
import math

import pytest

from msprobe.core.errors import ConfigError
from msprobe.core.monitor.anomaly import AnomalyDetector, StatRecord
from msprobe.core.monitor.grad_compare import first_divergent_step
from msprobe.core.monitor.grad_summary import interval_labels, summary_header
from msprobe.core.monitor.monitor_config import parse_monitor_config, parse_target_spec

TURBULENCE = [{"rule_name": "AnomalyTurbulence", "args": {"threshold": 0.5}}]


def _feed(detector, norms, prefix="grad_reduced", numel=1000, **extra):
    """Alert steps of a series of norms fed one step at a time."""
    steps = []
    for step, norm in enumerate(norms):
        values = {"norm": norm, **{k: v[step] for k, v in extra.items()}}
        if detector.observe(step, [StatRecord(prefix=prefix, name="w", values=values, numel=numel)]):
            steps.append(step)
    return steps


@pytest.mark.parametrize("norms, expected", [
    ([1.0, 1.1, 0.9, 1.05, 1.2, 0.95], []),                      # normal noise
    ([1.0, 1.1, 0.9, 1.05, 1000.0, 1.0], [4]),                   # x1000 spike at its step
    ([1.0, 1.1, 0.9, 1.05, 5.0, 1.0], []),                        # x5: within the measured normal range
    ([1.0, 1.1, 0.9, 1.05, 12.0, 11.0, 1.0], [4]),               # one alert per episode
    ([1.0, 1.1, 0.9, 1.05, 12.0, 1.0, 12.0], [4, 6]),            # a new episode after coming back
    ([1.0, 1.1, 0.9, 1.05, 1e-4, 1.0], [4]),                     # collapse below 1/1000
    ([1.0, 1.1, 0.9, 1.05, 0.0, 1.0], [4]),                      # collapse to exactly 0
    ([1000.0, 1.0, 1.0], []),                                     # nothing before 3 warm-up values
])
def test_turbulence_rule(norms, expected):
    assert _feed(AnomalyDetector(TURBULENCE), norms) == expected


def test_small_tensors_and_first_moments_are_not_judged_downwards():
    assert _feed(AnomalyDetector(TURBULENCE), [1.0, 1.1, 0.9, 1e-5], numel=1) == []
    assert _feed(AnomalyDetector(TURBULENCE), [1.0, 1.1, 0.9, 1e-5], numel=1) == []
    detector = AnomalyDetector(TURBULENCE)
    found = []
    for step, norm in enumerate([1.0, 1.1, 0.9, 1e-5, 100.0]):
        record = StatRecord(prefix="exp_avg", name="w", values={"norm": norm}, numel=1000, downward=False)
        found += [a.step for a in detector.observe(step, [record])]
    assert found == [4]


@pytest.mark.parametrize("value, op", [(math.nan, "norm"), (math.inf, "max"), (-math.inf, "min"), (3.0, "nans")])
def test_non_finite_values_alert_at_their_first_step_only(value, op):
    detector = AnomalyDetector(TURBULENCE)
    normal = 0.0 if op == "nans" else 1.0
    series = [normal, normal, value, value, normal, value]
    steps = []
    for step, v in enumerate(series):
        values = {"norm": 1.0, op: v} if op != "norm" else {"norm": v}
        alerts = detector.observe(step, [StatRecord(prefix="actv", name="m", io="output", values=values)])
        steps += [(a.step, a.rule) for a in alerts]
    assert steps == [(2, "AnomalyNan"), (5, "AnomalyNan")]


def test_bias_correction_scale_and_duplicates():
    detector = AnomalyDetector(TURBULENCE)
    found = []
    for step in range(1, 8):  # Adam's v grows like 1 - 0.999^t; corrected it is flat
        raw = 1.0 - 0.999 ** step
        record = StatRecord(prefix="exp_avg_sq", name="w", values={"norm": raw}, numel=1000,
                            magnitude_scale=1.0 / (1.0 - 0.999 ** step))
        found += detector.observe(step, [record])
    assert found == []
    twin = StatRecord(prefix="grad_reduced", name="w", values={"norm": math.nan}, duplicate=True)
    assert AnomalyDetector(TURBULENCE).observe(0, [twin]) == []


def test_call_order_decides_the_first_alert():
    detector = AnomalyDetector(TURBULENCE)
    late = StatRecord(prefix="grad_reduced", name="late", values={"norm": math.nan}, call_id=7)
    early = StatRecord(prefix="actv", name="early", io="output", values={"norm": math.inf}, call_id=2)
    assert [a.record.name for a in detector.observe(0, [late, early])] == ["early", "late"]


def test_vanishing_rule_needs_a_healthy_history():
    rules = [{"rule_name": "VanishingGradient", "args": {"threshold": 1e-7}}]
    assert _feed(AnomalyDetector(rules), [0.0, 0.0, 0.0], numel=100) == []
    assert _feed(AnomalyDetector(rules), [1.0, 1e-7, 1.0], numel=100) == [1]
    assert _feed(AnomalyDetector(rules), [1.0, 1e-7], numel=100, prefix="param") == []


@pytest.mark.parametrize("series, expected", [
    ([1.0, 1.0, 0.99, 0.98], None),
    ([0.96, 0.96], 0),
    ([1.0, 0.99, 0.95, 0.95], 2),
    ([1.0, math.nan, 0.9], 2),
    ([], None),
])
def test_first_divergent_step(series, expected):
    assert first_divergent_step(list(range(len(series))), series) == expected


def test_grad_probe_headers():
    assert interval_labels([-1, 0, 1]) == ["(-inf, -1]", "(-1, 0]", "(0, 1]", "(1, inf)"]
    assert interval_labels([0.5]) == ["(-inf, 0.5]", "(0.5, inf)"]
    assert summary_header("L2", [-0.01, 0, 0.01])[1:6] == ["(-inf, -0.01]", "(-0.01, 0]", "(0, 0.01]",
                                                           "(0.01, inf)", "=0"]
    assert summary_header("L0", [0]) == ["param_name", "MD5", "max", "min", "norm", "shape"]


def test_monitor_config_defaults_and_errors():
    config = parse_monitor_config({"ops": ["max", "bogus", "max"], "module_ranks": "0,1"})
    assert config.ops == ["max"] and config.module_ranks == [0, 1] and config.format == "csv"
    assert parse_monitor_config({"ops": ["bogus"]}).ops == ["norm"]
    assert parse_target_spec("x", "tuple[2]:1") == 1 and parse_target_spec("x", "tensor") == 0
    for bad, match in [({"alert": {"rules": [{"rule_name": "Nope"}]}}, "rule_name"),
                       ({"alert": {"rules": [{"rule_name": "AnomalyTurbulence", "args": {"threshold": -1}}]}}, "threshold"),
                       ({"cc_distribution": {"enable": True, "bogus": 1}}, "cc_distribution"),
                       ({"step_interval": 0}, "step_interval"), ({"ndigits": True}, "ndigits")]:
        with pytest.raises(ConfigError, match=match):
            parse_monitor_config(bad)


@pytest.mark.parametrize("content", [bytes(range(256)) * 8, b"x" * 200_000, b"a,b\n1,2\n"])
def test_grad_compare_rejects_files_that_are_not_grad_summaries(tmp_path, content):
    from msprobe.core.errors import ParseError
    from msprobe.core.monitor.grad_compare import GradComparator

    for side in ("a", "b"):
        (tmp_path / side).mkdir()
        (tmp_path / side / "grad_summary_0.csv").write_bytes(content)
    with pytest.raises(ParseError, match="grad_probe summary"):
        GradComparator.compare(str(tmp_path / "a"), str(tmp_path / "b"), str(tmp_path / "out"))
