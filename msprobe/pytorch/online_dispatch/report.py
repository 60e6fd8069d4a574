"""The output folder of one PtdbgDispatch context and its two CSVs (with header rows).

Layout (18.online_dispatch.md): `{dump_path}/atat_{tag}_rank{r}_{ts}/` holding
`compare_result_rank{r}_{ts}.csv` (one row per checked op), `compare_details_rank{r}_{ts}.csv` (one row per
output tensor) and the `npu/` and `cpu/` tensor dumps.
"""
import io
import os
import time
from typing import Dict, List, Optional

from msprobe.core.csv_cells import SafeCsvWriter
from msprobe.core.paths import DIR_MODE, atomic_write_text, make_dir, safe_name

__all__ = ["SUMMARY_COLUMNS", "DETAIL_COLUMNS", "create_run_dir", "write_reports"]

SUMMARY_COLUMNS = ["Op Name", "Direction", "Device Dtype", "Outputs Checked", "Accuracy Reached or Not", "Message"]
DETAIL_COLUMNS = ["Op Name", "Direction", "Output Index", "Device Dtype", "Bench Dtype", "Shape", "Cosine", "MaxAbsErr",
                  "Small Value Max Abs Err", "Max Abs Idx", "Max Rel Err", "Max Rel Idx", "Error Balance",
                  "Error Threshold", "EB Threshold", "Status", "Message"]


def create_run_dir(dump_path: str, tag: Optional[str], rank: int) -> (str, str):
    """(new folder, timestamp); a second context in the same second gets a '_1', '_2' ... suffix."""
    root = make_dir(dump_path, what="dump_path")
    stamp = time.strftime("%Y%m%d%H%M%S")
    prefix = f"atat_{safe_name(tag)}_rank{rank}" if tag else f"atat_rank{rank}"
    for attempt in range(1000):
        name = f"{prefix}_{stamp}" + (f"_{attempt}" if attempt else "")
        try:
            os.mkdir(os.path.join(root, name), DIR_MODE)
            return os.path.join(root, name), stamp
        except FileExistsError:
            continue
    raise FileExistsError(f"too many online_dispatch folders named {prefix}_{stamp}_* in {root}")


def _csv_text(columns: List[str], rows: List[Dict[str, object]]) -> str:
    buffer = io.StringIO()
    writer = SafeCsvWriter(buffer, lineterminator="\n")
    writer.writerow(columns)
    for row in sorted(rows, key=lambda r: (r["sequence"], r.get("Output Index", 0))):
        writer.writerow(["" if row.get(c) is None else row.get(c) for c in columns])
    return buffer.getvalue()


def write_reports(run_dir: str, stamp: str, rank: int, summaries: List[Dict], details: List[Dict]) -> (str, str):
    """Write both CSVs (rows ordered as the ops ran); returns their paths."""
    summary_path = os.path.join(run_dir, f"compare_result_rank{rank}_{stamp}.csv")
    details_path = os.path.join(run_dir, f"compare_details_rank{rank}_{stamp}.csv")
    atomic_write_text(summary_path, _csv_text(SUMMARY_COLUMNS, summaries))
    atomic_write_text(details_path, _csv_text(DETAIL_COLUMNS, details))
    return summary_path, details_path
