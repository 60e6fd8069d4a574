"""Job summary of a whole-job compare: per (step, rank) verdict counts and suspect, and where the job parted.

    summary = pair_summary(records, step=0, rank=3)        # small dict, made where the pair was compared
    job = job_summary([summary, ...])                      # job["parted"]: {"step", "rank", "call", ...}
    write_job_summary(job, "out")                          # out/job_summary.json
    print(job_summary_text(job))

The suspect of a pair is the advisor's (`advisor.find_suspect`): the first call whose output differs while
its inputs agree. Where the job parted is the earliest suspect over all pairs: the lowest step first; within
a step the suspect with the fewest collectives (`Distributed.*` entries) before it in its NPU dump (the
collectives are the points every rank passes together); between the same collectives a suspect that is not
itself a collective (a collective whose inputs agree and output differs received the difference from a
peer), then the earliest position in the dump, then the lowest rank. Ranks of one job run the same
program, so these positions are comparable.
"""
import os
import re
import time
from typing import Dict, Iterable, Optional

from msprobe.core.paths import atomic_write_json, make_dir

__all__ = ["pair_summary", "job_summary", "write_job_summary", "job_summary_text", "step_rank_of",
           "JOB_SUMMARY_FILE"]

JOB_SUMMARY_FILE = "job_summary.json"
_STEP, _RANK = re.compile(r"^step(\d+)$"), re.compile(r"^rank(\d*)$")


def step_rank_of(dump_json) -> tuple:
    """(step, rank) from a `.../step{S}/rank{R}/dump.json` path; 0 where the folder names say nothing."""
    rank_dir = os.path.dirname(os.path.abspath(dump_json))
    rank_match = _RANK.match(os.path.basename(rank_dir))
    step_match = _STEP.match(os.path.basename(os.path.dirname(rank_dir)))
    return (int(step_match.group(1)) if step_match else 0,
            int(rank_match.group(1) or 0) if rank_match else 0)


def _suspect_place(records, entry) -> tuple:
    """(position of `entry` in the NPU dump, collectives before it); (-1, -1) if it is not there."""
    entries = records.npu.entries
    try:
        position = entries.index(entry)
    except ValueError:
        return -1, -1
    return position, sum(1 for name in entries[:position] if isinstance(name, str) and name.startswith("Distributed."))


def pair_summary(records, step: int = 0, rank: int = 0, report: Optional[str] = None) -> dict:
    """The few facts of one compare that the job summary needs (a plain, picklable dict)."""
    from msprobe.core.compare.render import summary_counts

    summary = {"step": step, "rank": rank, "mode": records.mode, "counts": summary_counts(records),
               "suspect": None, "report": report}
    suspect = records.suspect
    if suspect is not None:
        position, collectives = _suspect_place(records, suspect.entry)
        summary["suspect"] = {"call": suspect.entry, "row_name": suspect.name, "line": suspect.row,
                              "phase": suspect.phase, "kind": suspect.kind, "summary": suspect.summary,
                              "position_in_dump": position, "collectives_before": collectives}
    return summary


def _parted_key(summary):
    suspect = summary["suspect"]
    received = str(suspect["call"]).startswith("Distributed.")  # its inputs agree: it got the difference
    return summary["step"], suspect["collectives_before"], received, suspect["position_in_dump"], summary["rank"]


def job_summary(summaries: Iterable[dict]) -> dict:
    """The job summary: pairs sorted by (step, rank), totals, and where the job parted (None if nowhere)."""
    pairs = sorted(summaries, key=lambda s: (s["step"], s["rank"]))
    totals: Dict[str, int] = {}
    for summary in pairs:
        for key, value in summary["counts"].items():
            totals[key] = totals.get(key, 0) + value
    with_suspect = [s for s in pairs if s["suspect"] is not None]
    parted = None
    if with_suspect:
        first = min(with_suspect, key=_parted_key)
        parted = dict(first["suspect"], step=first["step"], rank=first["rank"], report=first["report"])
    return {"pairs_compared": len(pairs), "pairs_with_suspect": len(with_suspect),
            "steps": sorted({s["step"] for s in pairs}), "ranks": sorted({s["rank"] for s in pairs}),
            "totals": totals, "parted": parted, "pairs": pairs}


def write_job_summary(job: dict, output_dir: str) -> str:
    output_dir = make_dir(output_dir, what="output_path")
    path = os.path.join(output_dir, JOB_SUMMARY_FILE)
    atomic_write_json(path, dict(job, written=time.strftime("%Y-%m-%d %H:%M:%S")))
    return path


def job_summary_text(job: dict, limit: int = 20) -> str:
    """Terminal lines: totals, where the job parted, and the first `limit` pairs with a suspect."""
    totals = job["totals"]
    lines = [f"job compare: {job['pairs_compared']} (step, rank) pairs over {len(job['steps'])} step(s) and "
             f"{len(job['ranks'])} rank(s); {totals.get('suspicious', 0)} rows beyond dtype tolerance, "
             f"{totals.get('red', 0)} red, {totals.get('unmatched', 0)} without counterpart; "
             f"{job['pairs_with_suspect']} pair(s) with a suspect."]
    parted = job["parted"]
    if parted is None:
        lines.append("  the job did not part: no pair has a suspect.")
        return "\n".join(lines)
    lines.append(f"  the job parted first at step {parted['step']}, rank {parted['rank']}, {parted['call']}: "
                 f"{parted['summary']}")
    shown = [s for s in job["pairs"] if s["suspect"] is not None][:limit]
    for summary in shown:
        lines.append(f"  step {summary['step']} rank {summary['rank']}: {summary['suspect']['call']} "
                     f"({summary['counts']['suspicious']} rows beyond tolerance)")
    if job["pairs_with_suspect"] > len(shown):
        lines.append(f"  ... {job['pairs_with_suspect'] - len(shown)} more in {JOB_SUMMARY_FILE}")
    return "\n".join(lines)
