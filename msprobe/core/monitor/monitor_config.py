"""The monitor's JSON config: every documented key with its default, validated with a message naming the key.

Keys (msprobe 1.2.1's, plus `plots`): targets, print_struct, module_ranks, ur_distribution, xy_distribution,
all_xy, forward_only, backward_only, wg_distribution, mv_distribution, param_distribution, mg_direction,
cc_distribution, alert, format, ops, eps, ndigits, step_count_per_record, start_step, step_interval,
collect_times, switch, append_output, squash_name, plots.
"""
import copy
import re
from dataclasses import dataclass, field

from msprobe.core.errors import ConfigError
from msprobe.core.log import logger
from msprobe.core.monitor.run_dirs import parse_stamp
from msprobe.core.paths import load_json

__all__ = ["MonitorConfig", "load_monitor_config", "parse_monitor_config", "OPS", "FORMATS", "RULES", "parse_target_spec"]

OPS = ("min", "max", "norm", "mean", "zeros", "nans")
FORMATS = ("csv", "tensorboard", "api")
RULES = ("AnomalyTurbulence", "AnomalyNan", "VanishingGradient")
CC_KEYS = {"enable", "cc_codeline", "cc_pre_hook", "cc_log_only"}
_TARGET_SPEC = re.compile(r"^(tensor|tuple\[(\d+)\](?::(\d+))?)$")


def _fail(key, value, allowed):
    raise ConfigError(f"monitor config: invalid value {value!r} for '{key}'; allowed: {allowed}.")


def parse_target_spec(key: str, spec: str) -> int:
    """Index of the element a target spec selects: "tensor" -> 0, "tuple[2]" -> 0, "tuple[2]:1" -> 1."""
    match = _TARGET_SPEC.match(spec) if isinstance(spec, str) else None
    if not match:
        _fail(key, spec, '"tensor", "tuple[n]" or "tuple[n]:i"')
    assert match is not None  # _fail raised
    if match.group(3) is not None:
        index, length = int(match.group(3)), int(match.group(2))
        if index >= length:
            _fail(key, spec, f"an index below the tuple length {length}")
        return index
    return 0


def _bool(key, value):
    if not isinstance(value, bool):
        _fail(key, value, "true | false")
    return value


def _int(minimum, maximum=None):
    def check(key, value):
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum or (
                maximum is not None and value > maximum):
            _fail(key, value, f"an integer in [{minimum}, {maximum if maximum is not None else 'inf'}]")
        return value
    return check


def _targets(key, value):
    if not isinstance(value, dict):
        _fail(key, value, 'an object {"module_or_param_name": {"input": "tensor", ...}}')
    for name, spec in value.items():
        if not isinstance(spec, dict):
            _fail(f"{key}.{name}", spec, 'an object such as {} or {"input": "tuple[2]:0", "output": "tensor"}')
        for io, text in spec.items():
            if io not in ("input", "output", "input_grad", "output_grad"):
                _fail(f"{key}.{name}", io, "input | output | input_grad | output_grad")
            parse_target_spec(f"{key}.{name}.{io}", text)
    return value


def _ranks(key, value):
    if isinstance(value, str):  # the performance page writes "module_ranks": "0"
        value = [int(v) for v in value.split(",") if v.strip().isdigit()] if value.strip() else []
    if not isinstance(value, list) or any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in value):
        _fail(key, value, "a list of rank numbers")
    return value


def _ops(key, value):
    if not isinstance(value, list):
        _fail(key, value, f"a list of {list(OPS)}")
    kept = []
    for op in value:
        if op in OPS:
            if op not in kept:
                kept.append(op)
        else:
            logger.warning(f"monitor config: op {op!r} is not supported and is ignored; supported: {list(OPS)}.")
    return kept or ["norm"]


def _cc(key, value):
    if not isinstance(value, dict):
        _fail(key, value, '{"enable": true, "cc_codeline": [], "cc_pre_hook": false, "cc_log_only": false}')
    unknown = set(value) - CC_KEYS
    if unknown:
        _fail(key, sorted(unknown), sorted(CC_KEYS))
    out = {"enable": False, "cc_codeline": [], "cc_pre_hook": False, "cc_log_only": False}
    out.update(value)
    for name in ("enable", "cc_pre_hook", "cc_log_only"):
        _bool(f"{key}.{name}", out[name])
    return out


def _alert(key, value):
    if not isinstance(value, dict) or not isinstance(value.get("rules", []), list):
        _fail(key, value, '{"rules": [{"rule_name": "AnomalyTurbulence", "args": {"threshold": 0.5}}], "dump": false}')
    rules = []
    for rule in value.get("rules", []):
        name = rule.get("rule_name") if isinstance(rule, dict) else None
        if name not in RULES:
            _fail(f"{key}.rules", rule, f"rule_name one of {list(RULES)}")
        args = rule.get("args", {}) or {}
        threshold = args.get("threshold")
        if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, (int, float))
                                      or threshold < 0):
            _fail(f"{key}.rules.{name}.threshold", threshold, "a number >= 0")
        rules.append({"rule_name": name, "args": dict(args)})
    return {"rules": rules, "dump": _bool(f"{key}.dump", value.get("dump", False))}


def _choice(*options):
    def check(key, value):
        if value not in options:
            _fail(key, value, " | ".join(options))
        return value
    return check


def _number(key, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        _fail(key, value, "a number >= 0")
    return float(value)


def _timestamps(key, value):
    example = '[] or two run-directory time stamps such as ["Dec03_21-34-40", "Dec03_21-34-42"]'
    if not isinstance(value, list) or len(value) not in (0, 2) or not all(isinstance(v, str) for v in value):
        _fail(key, value, example)
    if value:
        start, end = parse_stamp(value[0]), parse_stamp(value[1])
        bad = [v for v, parsed in zip(value, (start, end)) if parsed is None]
        if bad:
            _fail(key, bad[0], f"a time stamp of the form 'Dec03_21-34-40' (%b%d_%H-%M-%S); {example}")
        if start > end:
            raise ConfigError(f"monitor config: '{key}' starts at {value[0]}, after its end {value[1]}; "
                              "give [earlier, later] (stamps have no year, so a range cannot cross New Year).")
    return value


SCHEMA = {
    "targets": (_targets, {}), "print_struct": (_bool, False), "module_ranks": (_ranks, []),
    "ur_distribution": (_bool, False), "xy_distribution": (_bool, False), "all_xy": (_bool, False),
    "forward_only": (_bool, False), "backward_only": (_bool, False), "wg_distribution": (_bool, False),
    "mv_distribution": (_bool, False), "param_distribution": (_bool, False), "mg_direction": (_bool, False),
    "cc_distribution": (_cc, {}), "alert": (_alert, {"rules": [], "dump": False}),
    "format": (_choice(*FORMATS), "csv"), "ops": (_ops, ["norm"]), "eps": (_number, 1e-8),
    "ndigits": (_int(0, 20), 6), "step_count_per_record": (_int(1, 1_000_000), 1), "start_step": (_int(0), 0),
    "step_interval": (_int(1), 1), "collect_times": (_int(1), 100_000_000), "switch": (_bool, False),
    "append_output": (_timestamps, []), "squash_name": (_bool, True), "plots": (_bool, True),
}


@dataclass
class MonitorConfig:
    """Validated monitor settings; `raw` keeps the file's dict (dynamic mode rewrites `switch`)."""
    values: dict = field(default_factory=dict)
    path: str = ""

    def __getattr__(self, name):
        values = self.__dict__.get("values", {})
        if name in values:
            return values[name]
        raise AttributeError(name)

    @property
    def rules(self) -> list:
        return self.values["alert"]["rules"]


def parse_monitor_config(raw: dict, path: str = "") -> MonitorConfig:
    if not isinstance(raw, dict):
        raise ConfigError(f"monitor config must be a JSON object, got {type(raw).__name__}.")
    unknown = sorted(set(raw) - set(SCHEMA))
    if unknown:
        raise ConfigError(f"monitor config: unknown key(s) {unknown}; known: {sorted(SCHEMA)}.")
    values = {key: check(key, raw[key]) if key in raw else copy.deepcopy(default)
              for key, (check, default) in SCHEMA.items()}
    if "cc_distribution" not in raw:
        values["cc_distribution"] = _cc("cc_distribution", {})
    if values["forward_only"] and values["backward_only"]:
        logger.warning("monitor config: forward_only and backward_only are both true; no activation is collected.")
    if values["mg_direction"]:
        logger.warning("monitor config: mg_direction is not implemented by this msprobe and has no effect.")
    return MonitorConfig(values=values, path=path)


def load_monitor_config(path: str) -> MonitorConfig:
    return parse_monitor_config(load_json(path, what="monitor config"), path=path)
