"""Anomaly rules of the monitor, built so that normal training raises no alert (pure numerics, no framework).

Rules (config `alert.rules[].rule_name`):
* `AnomalyTurbulence(threshold=0.5, min_ratio=10, collapse_ratio=1000)`: works on a tensor's norm in log
  space. Baseline = median of the last `window` (20) log-norms of the same tensor, spread = their median
  absolute deviation (MAD). After `warmup` (3) values it alerts when the norm rises above the baseline by
  more than max(log(1 + threshold), log(min_ratio), 6 * MAD), or falls below it by more than
  log(collapse_ratio) (or to exactly 0). The floors come from measured normal training of small models,
  where one step can move a bias gradient up 5.7x or down 45x (signed quantities that cancel: a bias
  gradient near convergence, Adam's first moment); a x10 rise still stands out. Falls are judged only for
  tensors of 64 elements or more: the norm of a one-element output bias reached 0.00075x its median. One alert per episode:
  a tensor that stays out of band is not reported again until it has come back.
  Adam moments are bias-corrected first (m / (1 - b1^t), v / (1 - b2^t)); other optimizer states warm up by
  construction and are left to the non-finite rule; the first moment is judged upwards only.
* `AnomalyNan`: a NaN or Inf in any statistic (or a `nans` count > 0), at the step it first appears.
  Always on when any rule is configured: no magnitude rule can judge a NaN.
* `VanishingGradient(threshold=1e-7)`: a gradient whose root-mean-square falls below `threshold` after
  having been above it.
One alert per tensor and step; records marked `duplicate` (the same tensor seen twice, e.g. the unreduced
and reduced gradient without data parallelism, or a module input that is the previous module's output)
are not judged. Why: see docs/monitor.md ("Why the 1.2.1 rule cried wolf").
"""
import math
from dataclasses import dataclass, field
from typing import Optional

__all__ = ["StatRecord", "Alert", "AnomalyDetector", "GRAD_PREFIXES"]

GRAD_PREFIXES = ("grad_reduced", "grad_unreduced", "actv_grad")
_MAD_FACTOR = 6.0
_MIN_NUMEL_DOWNWARD = 64  # the norm of a few elements can come close to 0 by chance (a 1-element output bias)


@dataclass
class StatRecord:
    """Statistics of one tensor at one step (plain floats), in the order the tensors were seen."""
    prefix: str                # csv prefix: actv, actv_grad, grad_reduced, grad_unreduced, exp_avg, param, ...
    name: str                  # module or parameter name
    values: dict               # op -> float (always contains "norm" when computable)
    call_id: int = 0
    io: str = ""               # input / output / input_grad / output_grad for modules
    numel: int = 0
    vpp_stage: int = 0
    micro_step: int = 0
    magnitude_scale: float = 1.0   # multiply the norm by this before judging (Adam bias correction)
    turbulence: bool = True        # False: only the non-finite rule judges this record
    downward: bool = True          # False: a fall is normal for this quantity (signed averages)
    duplicate: bool = False

    def tag(self, rank: int) -> str:
        return f"{self.vpp_stage}:{self.name}/rank{rank}/{self.io or self.prefix}"


@dataclass
class Alert:
    step: int
    rule: str
    record: StatRecord
    op: str
    value: float
    baseline: float
    message: str
    rank: int = 0

    def as_dict(self) -> dict:
        return {"rank": self.rank, "step": self.step, "micro_step": self.record.micro_step, "pp_stage": 0,
                "vpp_stage": self.record.vpp_stage, "call_id": self.record.call_id,
                "tag_name": self.record.tag(self.rank), "rule": self.rule, "prefix": self.record.prefix,
                "name": self.record.name, "op": self.op, "value": self.value, "baseline": self.baseline,
                "message": self.message, "group_mates": [self.rank]}


@dataclass
class _Series:
    logs: list = field(default_factory=list)
    above_floor: bool = False
    out_of_band: bool = False
    nonfinite: bool = False


class AnomalyDetector:
    """Feed each step's records in call order; returns the alerts of that step."""

    def __init__(self, rules: list, rank: int = 0, warmup: int = 3, window: int = 20):
        self.rank = rank
        self.warmup = warmup
        self.window = window
        self.turbulence: Optional[float] = None
        self.min_ratio = 10.0
        self.collapse_ratio = 1000.0
        self.vanishing: Optional[float] = None
        self.enabled = bool(rules)
        for rule in rules:
            args = rule.get("args") or {}
            if rule["rule_name"] == "AnomalyTurbulence":
                self.turbulence = float(args.get("threshold", 0.5))
                self.min_ratio = float(args.get("min_ratio", self.min_ratio))
                self.collapse_ratio = float(args.get("collapse_ratio", self.collapse_ratio))
            elif rule["rule_name"] == "VanishingGradient":
                self.vanishing = float(args.get("threshold", 1e-7))
        self._series: dict = {}
        self.alerts: list = []

    def _alert(self, step, rule, record, op, value, baseline, detail) -> Alert:
        message = (f"Rule {rule} reports anomaly signal in ('{record.tag(self.rank)}', '{op}') at step {step}: "
                   f"{detail}.")
        return Alert(step=step, rule=rule, record=record, op=op, value=value, baseline=baseline,
                     message=message, rank=self.rank)

    def observe(self, step: int, records: list) -> list:
        if not self.enabled:
            return []
        found = []
        for record in sorted(records, key=lambda r: r.call_id):
            alert = self._judge(step, record)
            if alert is not None and not record.duplicate:
                found.append(alert)
        self.alerts.extend(found)
        return found

    def _judge(self, step: int, record: StatRecord) -> Optional[Alert]:
        key = (record.prefix, record.name, record.io)
        series = self._series.setdefault(key, _Series())
        for op, value in record.values.items():
            if op == "ratio":  # update/parameter ratio: not a tensor statistic (0/0 for a zero-initialised bias)
                continue
            if value is None or not math.isfinite(value) or (op == "nans" and value > 0):
                first = not series.nonfinite
                series.nonfinite = True
                return self._alert(step, "AnomalyNan", record, op, value, 0.0,
                                   f"non-finite value ({op}={value})") if first else None
        series.nonfinite = False
        norm = record.values.get("norm")
        if norm is None:
            return None
        alert = None
        if self.vanishing is not None and record.prefix in GRAD_PREFIXES and record.numel:
            rms = norm / math.sqrt(record.numel)
            if rms < self.vanishing and series.above_floor:
                alert = self._alert(step, "VanishingGradient", record, "norm", norm, self.vanishing,
                                    f"root-mean-square {rms:.3g} below {self.vanishing:g}")
            series.above_floor = series.above_floor or rms >= self.vanishing
        if not record.turbulence or self.turbulence is None:
            return alert
        magnitude = norm * record.magnitude_scale
        history = series.logs
        judged = len(history) >= self.warmup
        if magnitude <= 0.0:
            if judged and record.downward and record.numel >= _MIN_NUMEL_DOWNWARD and not series.out_of_band \
                    and alert is None:
                alert = self._alert(step, "AnomalyTurbulence", record, "norm", norm, math.exp(_median(history)),
                                    "norm collapsed to 0")
            series.out_of_band = judged
            return alert
        log_value = math.log(magnitude)
        if judged:
            baseline = _median(history)
            spread = _median([abs(h - baseline) for h in history])
            up_band = max(math.log1p(self.turbulence), math.log(self.min_ratio), _MAD_FACTOR * spread)
            deviation = log_value - baseline
            falls = record.downward and record.numel >= _MIN_NUMEL_DOWNWARD
            out = deviation > up_band or (falls and -deviation > math.log(self.collapse_ratio))
            if out and not series.out_of_band and alert is None:
                alert = self._alert(step, "AnomalyTurbulence", record, "norm", norm, math.exp(baseline) / record.magnitude_scale,
                                    f"{'bias-corrected ' if record.magnitude_scale != 1.0 else ''}norm is "
                                    f"{math.exp(deviation):.3g}x its recent median")
            series.out_of_band = out
        history.append(log_value)
        if len(history) > self.window:
            del history[0]
        return alert


def _median(values: list) -> float:
    ordered = sorted(values)
    n = len(ordered)
    mid = n // 2
    return ordered[mid] if n % 2 else 0.5 * (ordered[mid - 1] + ordered[mid])
