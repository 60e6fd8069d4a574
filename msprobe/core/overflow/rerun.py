"""run_overflow_check, framework-neutral part: which dumped calls to re-run, the verdict, the report.

    cases, skipped = overflow_cases(load_api_cases("dump.json"))   # forward calls whose output is non-finite
    row = judge_rerun(case, inputs="real", same_dtype=True, float32=False, device=None)
    write_report(rows, out_dir)  -> run_overflow_check_result_{timestamp}.csv

A call is re-run when its inputs were finite and its output was not (a NaN-origin "producer"): a call
fed inf/nan cannot be judged by its own re-run. Verdict (msprobe 1.2.1's definition): *normal* when the
CPU run in the same dtype overflows too (the values really leave the dtype's range), *abnormal* when it
does not (the device's kernel overflowed where a CPU kernel does not). The float32 run says whether
the overflow goes away in higher precision (then a wider dtype or rescaling would avoid it).
"""
import io
import os
import time
from dataclasses import dataclass
from typing import List, Optional, Tuple

from msprobe.core.csv_cells import SafeCsvWriter
from msprobe.core.log import logger
from msprobe.core.overflow.origin import IgnoreRules
from msprobe.core.paths import atomic_write_text

__all__ = ["RerunRow", "overflow_cases", "judge_rerun", "write_report", "COLUMNS", "overflow_tensor_dir"]

COLUMNS = ("api_name", "inputs", "dut_overflow", "cpu_same_dtype_overflow", "cpu_fp32_overflow",
           "device_overflow", "verdict", "message")
_NO_RULES = IgnoreRules()


@dataclass
class RerunRow:
    api_name: str
    inputs: str = ""                       # "real" (dump_tensor_data) or "generated" (from statistics)
    dut_overflow: bool = True
    cpu_same_dtype_overflow: Optional[bool] = None
    cpu_fp32_overflow: Optional[bool] = None
    device_overflow: Optional[bool] = None
    verdict: str = ""                      # normal / abnormal / skipped
    message: str = ""

    def cells(self):
        return [("" if value is None else value) for value in (
            self.api_name, self.inputs, self.dut_overflow, self.cpu_same_dtype_overflow, self.cpu_fp32_overflow,
            self.device_overflow, self.verdict, self.message)]


def overflow_cases(info) -> Tuple[list, List[RerunRow]]:
    """(cases to re-run, rows for overflowing calls that are not re-run) of a DumpInfo."""
    chosen, skipped = [], []
    for case in info.cases:
        record = case.forward
        name = f"{case.name}.forward"
        if not _NO_RULES.non_finite(name, record.get("output")):
            continue
        fed = any(_NO_RULES.non_finite(name, record.get(key)) for key in ("input_args", "input_kwargs"))
        if fed:
            skipped.append(RerunRow(name, verdict="skipped",
                                    message="its input already held inf/nan: re-run the call that produced it"))
        else:
            chosen.append(case)
    return chosen, skipped


def overflow_tensor_dir(dump_json: str) -> Optional[str]:
    """dump_tensor_data beside dump.json (overflow_check saves the kept calls' tensors there), if present."""
    folder = os.path.join(os.path.dirname(os.path.abspath(dump_json)), "dump_tensor_data")
    return folder if os.path.isdir(folder) else None


def judge_rerun(name: str, inputs: str, same_dtype: bool, float32: Optional[bool],
                device: Optional[bool] = None) -> RerunRow:
    if same_dtype:
        verdict, message = "normal", "the CPU run in the same dtype overflows too"
    else:
        verdict, message = "abnormal", "the CPU run in the same dtype stays finite"
    if float32 is False:
        message += "; finite in float32"
    elif float32:
        message += "; overflows in float32 as well"
    return RerunRow(name, inputs, True, same_dtype, float32, device, verdict, message)


def terminal_line(row: RerunRow) -> str:
    if row.verdict == "normal":
        return f"The {row.api_name} overflow is a normal overflow."
    if row.verdict == "abnormal":
        return f"The {row.api_name} overflow is an abnormal overflow."
    return f"The {row.api_name} overflow was not re-run: {row.message}."


def write_report(rows: List[RerunRow], out_dir: str) -> str:
    text = io.StringIO()
    writer = SafeCsvWriter(text, lineterminator="\n")
    writer.writerow(COLUMNS)
    for row in rows:
        writer.writerow(row.cells())
    path = os.path.join(out_dir, f"run_overflow_check_result_{time.strftime('%Y%m%d%H%M%S')}.csv")
    atomic_write_text(path, text.getvalue())
    logger.info(f"run_overflow_check: {len(rows)} overflowing call(s) reported in {path}")
    return path
