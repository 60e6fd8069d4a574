"""Run one API the way run_ut does and print its metrics and verdict (used by op_generate scripts)."""
from msprobe.core.naming import check_api_name
from msprobe.core.precision.new_standard import judge_row
from msprobe.core.precision.output_check import ERROR, PASS
from msprobe.core.precision.standards import (BENCHMARK, BINARY, STANDARD_LABELS, dtype_short_name,
                                             standard_of)
from msprobe.core.run_ut.api_info import ApiCase
from msprobe.pytorch.api_accuracy_checker.executor import device_for, run_case
from msprobe.pytorch.api_accuracy_checker.replay_guard import ReplayRefused

__all__ = ["reproduce", "STANDARD_FIELDS"]

# what each standard prints: (title, metric key)
STANDARD_FIELDS = {
    "absolute_threshold": [("Inf/Nan Error Ratio", "inf_nan_err_rate"), ("Relative Error Ratio", "rel_err_rate"),
                           ("Absolute Error Ratio", "abs_err_rate")],
    "benchmark": [("Small Value Error Proportion", "small_value_err_ratio"), ("Maximum Relative Error", "rel_err_max"),
                  ("Mean Relative Error", "rel_err_mean"), ("Root Mean Squared Error", "rmse"),
                  ("Error Balance", "error_balance")],
    "binary": [("Error Rate", "binary_err_rate")],
    "ulp": [("Maximum ULP Error", "ulp_max"), ("Mean ULP Error", "ulp_mean"), ("ULP Error Proportion", "ulp_ratio")],
    "thousandth": [("Thousandth ratio", "thousandth")],
}


def _verdict(row, standard):
    """The standard's verdict against the CPU bench alone: ratio-based standards (benchmark) need a
    second device, so they fall back to the run_ut rule (cosine, max abs error, 双百/双千/双万)."""
    dtype_name = dtype_short_name(row.get("tested_dtype", ""))
    if standard == BENCHMARK or dtype_name not in ("float16", "bfloat16", "float32"):
        return row["status"]
    return judge_row(standard, row, {}, dtype_name)["比对结果"]


def _print_row(row):
    standard = standard_of(row["name"]) if "binary_err_rate" not in row or "cosine" in row else BINARY
    lines = [("API", row["name"]), ("Shape", row.get("shape", "")), ("Dtype of out_device", row.get("tested_dtype")),
             ("Dtype of out_bench", row.get("bench_dtype")), ("Compare Standard", STANDARD_LABELS[standard]),
             ("Cosine", row.get("cosine")), ("Max Abs Error", row.get("max_abs_err"))]
    lines += [(title, row.get(key)) for title, key in STANDARD_FIELDS[standard]]
    verdict = _verdict(row, standard)
    lines += [("Verdict", verdict), ("Message", row.get("message", ""))]
    width = max(len(title) for title, _ in lines)
    print("\n".join(f"{title:<{width}} : {'' if value is None else value}" for title, value in lines))
    print("-" * (width + 20))
    return verdict


def reproduce(api_name, function, forward, backward, propagation="forward", tensor_dir=None, seed=1234,
              iter_times=1, device_id=0):
    """Run `function` on the recorded inputs `iter_times` times; print every output's metrics and verdict.
    Returns the worst verdict ('pass', 'warning' or 'error')."""
    call = check_api_name(api_name, what="api_name")
    case = ApiCase(name=call.call_name, prefix=call.prefix, api=call.api, forward=forward,
                   backward=backward if propagation == "backward" else None)
    settings = {"device": device_for(device_id), "tensor_dir": tensor_dir}
    verdicts = []
    for iteration in range(max(1, int(iter_times)) if tensor_dir is None else 1):
        try:
            outcome = run_case(case, settings, function=function, seed=seed + iteration)
        except ReplayRefused as exc:  # an effect outside tensors or a tensor over the cap: one line, nothing ran
            print(f"[ERROR] {exc}")
            return ERROR
        rows = [r for r in outcome["details"] if f".{propagation}." in r["name"]]
        print(f"== {api_name} {propagation}, iteration {iteration} ==")
        if not rows:
            print(f"no {propagation} output to compare: {outcome['message']}")
            verdicts.append(ERROR)
        verdicts += [_print_row(row) for row in rows]
    for status in (ERROR, "warning"):
        if status in verdicts:
            return status
    return PASS
