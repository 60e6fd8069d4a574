"""The framework-free half of compile_check: two dumps of one model (compiled side, eager side) -> report.

Both frameworks' compile_check produce two dump.json files whose module/cell entries pair by name (the
PyTorch one by dumping an eager and a compiled copy, the MindSpore one by writing per-cell results with
`write_dump`). `judge()` compares them with compare's dtype-aware tolerances, ranks every call by its
departure (the worst score / allowance of its rows: beyond tolerance above 1) and takes the advisor's
first cause as the first departing module: the first call, in execution order (forward, then backward),
whose output departs while its inputs agree. Parameter-gradient rows are ranked but never name the first
departure: they are reductions over the batch that a compiler orders its own way.
"""
import json
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from msprobe.core.dump.array_stats import array_statistics

__all__ = ["RESULT_FILE", "judge", "ranking", "module_path", "write_report", "write_dump", "tensor_descriptor",
           "add_script_arguments", "check_script", "whole_graph_line"]

RESULT_FILE = "compile_check_result.json"


def ranking(records) -> List[Dict[str, Any]]:
    """[{call, departure, beyond_tolerance, parameters_grad}] per call, largest departure first."""
    judgement = records.judgement
    if judgement is None:
        return []
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(judgement.allowed > 0, judgement.scores / judgement.allowed, np.nan)
    worst: Dict[str, float] = {}
    for row, entry in enumerate(records.entries):
        values = ratio[row]
        if not np.isfinite(values).any():
            continue
        value = float(np.nanmax(np.where(np.isfinite(values), values, np.nan)))
        worst[entry] = max(worst.get(entry, 0.0), value)
    ranked = sorted(worst.items(), key=lambda item: -item[1])
    return [{"call": entry, "departure": round(value, 3), "beyond_tolerance": value > 1.0,
             "parameters_grad": entry.endswith("parameters_grad")} for entry, value in ranked]


def module_path(entry: str) -> Optional[str]:
    """'Module.encoder.layer.0.Foo.forward.0' (or 'Cell. ...') -> 'encoder.layer.0'."""
    parts = entry.split(".")
    for marker in ("forward", "backward", "parameters_grad"):
        if marker in parts:
            return ".".join(parts[1:parts.index(marker) - 1])
    return None


def judge(compiled_json: str, eager_json: str, output_path: str) -> Tuple[Dict[str, Any], Optional[str]]:
    """Compare the compiled dump (NPU side) with the eager dump (bench side); writes compare's xlsx and
    advisor files into `output_path`. Returns the report and the suspect's phase (None without one)."""
    from msprobe.core.compare.advisor import find_suspect
    from msprobe.core.compare.pair import CompareOptions, compare_pair

    outcome = compare_pair(compiled_json, eager_json, output_path, CompareOptions(progress=False))
    records = outcome.records
    suspect = find_suspect(records)
    parameter_gradients = []
    if suspect is not None and suspect.phase not in ("forward", "backward"):
        parameter_gradients.append(suspect.summary or suspect.entry)
        suspect = None
    report = {"eager_dump": eager_json, "compiled_dump": compiled_json, "compare_result": outcome.xlsx_path,
              "advisor": outcome.advisor_path, "ranking": ranking(records), "first_departure": None,
              "parameter_gradient_departures": parameter_gradients}
    if suspect is None:
        return report, None
    report["first_departure"] = {"call": suspect.entry, "module": module_path(suspect.entry),
                                 "phase": suspect.phase, "kind": suspect.kind, "summary": suspect.summary}
    return report, suspect.phase


def write_report(report: Dict[str, Any], output_path: str) -> str:
    path = os.path.join(output_path, RESULT_FILE)
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(report, handle, indent=2)
    return path


def tensor_descriptor(type_name: str, dtype: str, array: np.ndarray) -> Dict[str, Any]:
    """A dump.json tensor descriptor (statistics mode) of a host array whose framework dtype is `dtype`."""
    stats = array_statistics(array) or [None] * 4
    return {"type": type_name, "dtype": dtype, "shape": list(array.shape),
            **dict(zip(("Max", "Min", "Mean", "Norm"), stats))}


def write_dump(folder: str, framework: str, entries: Sequence[Tuple[str, Dict[str, Any]]]) -> str:
    """Write `entries` ([(name, {"input_args": [...], "output": [...], ...})], descriptors already made) as
    a statistics-mode dump.json under folder/step0/rank/; its path."""
    directory = os.path.join(folder, "step0", "rank")
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "dump.json")
    with open(path, "w", encoding="utf-8") as handle:
        json.dump({"task": "statistics", "level": "L0", "framework": framework, "dump_data_dir": None,
                   "data": dict(entries)}, handle, indent=1)
    return path


def whole_graph_line(whole: Dict[str, Any]) -> str:
    """One line of the whole-graph check: agrees, or departs and which modules the search found at fault."""
    tolerance = whole["tolerance"]
    measure = (f"{whole['departure_eps']:.4g} eps, {whole['departure']:.3g} x the allowance"
               f"{'' if tolerance == 'default' else f' of {tolerance:.4g} eps'}")
    if not whole["departs"]:
        return f"whole graph: agrees with eager ({measure})"
    named = "; ".join((found["module"] or "(the model's own forward)") +
                      (f" (fused across {', '.join(found['fused_across'])})" if found["fused_across"] else "")
                      for found in whole["faulty_modules"])
    return (f"whole graph: departs ({measure}); faulty module: {named} ({len(whole['trials'])} trials, "
            f"{whole['seconds']:.1f} s)")


def add_script_arguments(parser) -> None:
    """The command-line arguments both frameworks' `compile_check` commands take."""
    parser.add_argument("--script", required=True,
                        help="Python file defining compile_target() -> (model, example_inputs)")
    parser.add_argument("--forward_only", "--forward-only", dest="forward_only", action="store_true",
                        help="no backward pass")
    parser.add_argument("-o", "--output_path", "--output-path", dest="output_path", required=True,
                        help="folder for the dumps, the xlsx report and " + RESULT_FILE)


def check_script(args, check, error, **options) -> int:
    """Run `check(model, example_inputs, output_path=..., backward=..., **options)` on what the
    compile_target() of `args.script` returns, and print the outcome; `error` is the framework's
    CompileCheckError (one [ERROR] line when the script does not fit)."""
    from msprobe.core.user_script import call_user_function, load_script_function

    script = args.script
    target = load_script_function(script, "compile_target", "(model, example_inputs)", error)
    result = call_user_function(target, "compile_target()", error)
    if not (isinstance(result, tuple) and len(result) == 2 and callable(result[0])):
        raise error(f"compile_target() of {script} must return (model, example_inputs).")
    model, example_inputs = result
    report = check(model, example_inputs, output_path=args.output_path, backward=not args.forward_only, **options)
    whole = report.get("whole_graph")
    if whole is not None:
        print(whole_graph_line(whole))
    skipped = report.get("not_compiled") or []
    if skipped:
        print(f"not compiled, not checked: {len(skipped)} cell(s), first '{skipped[0]['cell']}' ({skipped[0]['error']})")
    if "compare_result" in report:  # the module-by-module comparison ran
        first = report["first_departure"]
        print(f"first departure: {first['call']} ({first['summary'] or first['kind']})" if first else
              "no module departs beyond tolerance")
        print(f"report: {report['compare_result']}")
    print(f"result: {os.path.join(args.output_path, RESULT_FILE)}")
    return 0
