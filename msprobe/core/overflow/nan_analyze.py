"""Cross-rank NaN/Inf origin: which rank, step and call of a distributed job first produced an inf/nan.

    report = analyze_job("dump_root", ignore=["masked_fill:-inf"])
    report["origin"]      # {"rank", "step", "call", "role", "kinds", "stack", ...} or None
    write_report(report, "out")   # out/nan_analyze_{timestamp}.json

Inputs: `step*/rank*/dump.json` of any task that records Max/Min (statistics, overflow_check,
flight_recorder; tensor dumps too). Each rank's dump is read once, in dump (= execution) order; only a few
facts per (step, rank) are kept, so memory grows with ranks × collectives, never with the dumps' size.

How calls of different ranks are ordered. Within a rank, dump order. Across ranks, through the
collectives they share: `Distributed.<op>.<n>.forward` of the same name on two ranks is the same
collective (msprobe counts every collective per process), and everything before it on any rank happens
before everything after it on any rank. The collectives of all ranks are merged into one global order
(a topological sort of the per-rank sequences), and each call gets the interval
(last collective before it, first collective after it). Steps are barriers: step N precedes step N+1.

Roles, per call (from core/overflow/origin.py: finite inputs and a non-finite output = producer), with
one rule for communication: a `Distributed.*` call whose input on this rank is finite but whose output
is not has *received* the inf/nan from a peer (all_reduce, broadcast, recv, all_gather): the rank is a
consumer, not the origin. Each rank's first anomalous call is its candidate:

  producer    the rank computed the first inf/nan itself
  input       the first anomalous call already had a non-finite input that no dumped call produced
              (the data, the weights, or a call outside the dump's scope)
  received    the rank got it through a collective

The origin is the earliest producer (or input) candidate: one that no other candidate precedes in the
order above. Candidates no collective orders (two ranks producing between the same two collectives) are
listed as `concurrent`; the lowest rank among them is named. When every rank only received (each fed
finite values into one collective whose result is inf, e.g. an fp16 sum overflowing), the collective
itself is the producer.

Limits: collectives are matched by name, so ranks must call the same collectives in the same count
(data and tensor parallel do; pipeline stages in separate sub-groups may not: then the order falls back
to dump order and step). overflow_check dumps keep only anomalous calls: finite collectives are missing,
and the order is as fine as the collectives that were kept.
"""
import heapq
import json
import os
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple, cast

from msprobe.core.errors import ParseError
from msprobe.core.io.load import load_stack
from msprobe.core.job_tree import job_folders
from msprobe.core.naming import EntryName, is_module_name
from msprobe.core.overflow.origin import IgnoreRules, _descriptors, call_role, tensor_kinds
from msprobe.core.paths import atomic_write_json, make_dir

__all__ = ["RankTrace", "scan_rank", "analyze_job", "write_report", "report_text", "REPORT_PREFIX"]

REPORT_PREFIX = "nan_analyze"
_COMM_PREFIX = "Distributed"


@dataclass
class RankTrace:
    """What one (step, rank) dump says: its collectives in order and its first anomalous call."""
    step: int
    rank: int
    folder: str
    collectives: List[str] = field(default_factory=list)
    first: Optional[dict] = None  # {"call", "role", "call_role", "kinds", "position", "after"}


def _kinds(entry) -> List[str]:
    found = set()
    for desc in _descriptors(entry.get("output", entry)):
        found |= tensor_kinds(desc)
    return sorted(found)


def _first_role(name, entry, rules):
    """(role across ranks, role within the call) of one dump entry, or (None, None) when finite."""
    parsed = EntryName.parse(name)
    kind = parsed.direction if parsed is not None else "forward"
    role = call_role(kind, name, entry, rules)
    if role is None:
        return None, None
    if parsed is not None and parsed.prefix == _COMM_PREFIX and role == "producer":
        return "received", role
    if role in ("propagator", "consumer"):
        return "input", role  # a non-finite input no earlier dumped call of this rank produced
    return "producer", role


def _read_data(path) -> dict:
    try:
        with open(path, encoding="utf-8") as handle:
            raw = json.load(handle)
    except (ValueError, RecursionError) as exc:  # JSON and UTF-8 errors are ValueErrors
        raise ParseError(f"dump file '{path}' cannot be read: {str(exc).splitlines()[0][:200]}") from None
    data = raw.get("data") if isinstance(raw, dict) else None
    if not isinstance(data, dict):
        raise ParseError(f"dump file '{path}' has no 'data' object; is it a msprobe dump.json?")
    return data


def scan_rank(where, rules: IgnoreRules) -> RankTrace:
    """One pass over one rank's dump.json: collectives in order and the first anomalous call. A module
    (Module/Cell) entry is only the answer when no API call is anomalous: its output is made by the API
    calls inside it, which name the culprit more precisely (and parameters_grad entries hold their place
    in dump.json from the forward pass, not from when the gradient was made)."""
    trace = RankTrace(where.step, where.rank, where.folder)
    first_module = None
    for position, (name, entry) in enumerate(_read_data(where.dump_json).items()):
        if not isinstance(entry, dict):
            raise ParseError(f"dump file '{where.dump_json}': entry '{name}' is not an object.")
        if trace.first is None:
            role, call = _first_role(name, entry, rules)
            if role is not None:
                found = {"call": name, "role": role, "call_role": call, "kinds": _kinds(entry),
                         "position": position, "after": len(trace.collectives) - 1}
                if not is_module_name(name):
                    trace.first = found
                elif first_module is None:
                    first_module = found
        if name.startswith(_COMM_PREFIX + "."):
            trace.collectives.append(name)
    if trace.first is None:
        trace.first = first_module
    return trace


def _global_order(traces: List[RankTrace]) -> Dict[str, int]:
    """Collective name -> position in one order consistent with every rank's sequence (Kahn's sort;
    names in a cycle, from mismatched counters, are appended in first-seen order)."""
    successors: Dict[str, set] = defaultdict(set)
    indegree: Dict[str, int] = defaultdict(int)
    first_seen: Dict[str, Tuple[int]] = {}
    for trace in traces:
        for index, name in enumerate(trace.collectives):
            first_seen.setdefault(name, (len(first_seen),))
            indegree.setdefault(name, 0)
            if index and name not in successors[trace.collectives[index - 1]]:
                successors[trace.collectives[index - 1]].add(name)
                indegree[name] += 1
    ready = [(first_seen[name], name) for name, degree in indegree.items() if degree == 0]
    heapq.heapify(ready)
    order: Dict[str, int] = {}
    while ready:
        _, name = heapq.heappop(ready)
        order[name] = len(order)
        for nxt in successors[name]:
            indegree[nxt] -= 1
            if indegree[nxt] == 0:
                heapq.heappush(ready, (first_seen[nxt], nxt))
    for name in sorted(set(indegree) - set(order), key=lambda n: first_seen[n]):
        order[name] = len(order)
    return order


def _interval(trace: RankTrace, order: Dict[str, int]):
    """(global index of the last collective before the first anomaly, of the first one after it)."""
    after = cast(dict, trace.first)["after"]  # only traces with an anomaly come here
    low = order[trace.collectives[after]] if after >= 0 else -1
    nxt = after + 1
    high = order[trace.collectives[nxt]] if nxt < len(trace.collectives) else float("inf")
    return low, high


def _earliest(candidates, order):
    """The candidates no other candidate precedes (precedes: its next collective is at or before the
    other's last collective)."""
    spans = {id(t): _interval(t, order) for t in candidates}
    return [t for t in candidates
            if not any(spans[id(o)][1] <= spans[id(t)][0] for o in candidates if o is not t)]


def _collective_overflow(traces, order):
    """Every rank only received: the earliest collective through which they received it."""
    received = [t for t in traces if t.first and t.first["role"] == "received"]
    if not received:
        return None
    return min(received, key=lambda t: (order.get(t.first["call"], 0), t.rank))


def _origin_entry(trace: RankTrace, concurrent=False) -> dict:
    stack_file = os.path.join(trace.folder, "stack.json")
    first = cast(dict, trace.first)  # only traces with an anomaly come here
    try:
        stack = load_stack(stack_file).get(first["call"], "")
    except ParseError:
        stack = ""
    return {"rank": trace.rank, "step": trace.step, "call": first["call"], "role": first["role"],
            "kinds": first["kinds"], "position_in_dump": first["position"], "stack": stack,
            "dump": trace.folder, "concurrent_with_others": concurrent}


def analyze_job(root, ignore: Optional[List[str]] = None) -> dict:
    """The cross-rank NaN/Inf report of the dump under `root` (see the module docstring)."""
    rules = IgnoreRules(ignore)
    by_step = defaultdict(list)
    for where in job_folders(root):
        by_step[where.step].append(scan_rank(where, rules))
    ranks = sorted({t.rank for traces in by_step.values() for t in traces})
    report = {"dump_root": os.path.abspath(root), "steps": sorted(by_step), "ranks": ranks, "origin": None,
              "concurrent": [], "collective_overflow": False, "first_anomaly_by_rank": []}
    for step in sorted(by_step):
        traces = by_step[step]
        report["first_anomaly_by_rank"] += [
            {"step": t.step, "rank": t.rank, "call": t.first["call"], "role": t.first["role"], "kinds": t.first["kinds"]}
            for t in traces if t.first]
        if report["origin"] is not None or not any(t.first for t in traces):
            continue
        order = _global_order(traces)
        candidates = [t for t in traces if t.first and t.first["role"] != "received"]
        if candidates:
            earliest = sorted(_earliest(candidates, order), key=lambda t: (_interval(t, order)[0], t.rank))
            report["origin"] = _origin_entry(earliest[0], len(earliest) > 1)
            report["concurrent"] = [_origin_entry(t, True) for t in earliest[1:]]
        else:
            trace = _collective_overflow(traces, order)
            report["origin"] = dict(_origin_entry(trace), role="producer")
            report["collective_overflow"] = True
    return report


def report_text(report) -> str:
    """The terminal summary of a report."""
    origin = report["origin"]
    ranks, steps = len(report["ranks"]), len(report["steps"])
    if origin is None:
        return f"nan_analyze: no inf/nan in {ranks} rank(s) × {steps} step(s)."
    how = {"producer": "produced it (finite inputs, non-finite output)",
           "input": "already had a non-finite input that no dumped call produced (data, weights, or a call "
                    "outside the dump's scope)"}[origin["role"]]
    if report["collective_overflow"]:
        how = "every rank fed it finite values: the collective itself overflowed"
    lines = [f"nan_analyze: inf/nan first appears on rank {origin['rank']}, step {origin['step']}, in "
             f"{origin['call']} ({', '.join(origin['kinds']) or 'non-finite'}): it {how}."]
    if origin["stack"]:
        lines.append(f"  stack: {' '.join(str(origin['stack']).split())[:400]}")
    for other in report["concurrent"]:
        lines.append(f"  not ordered against it (no collective between them): rank {other['rank']}, "
                     f"{other['call']} ({other['role']})")
    received = [a for a in report["first_anomaly_by_rank"]
                if a["step"] == origin["step"] and a["role"] == "received"]
    if received:
        lines.append("  received it through collectives: " + ", ".join(f"rank {a['rank']} ({a['call']})"
                                                                        for a in received))
    return "\n".join(lines)


def write_report(report, output_dir, timestamp=None) -> str:
    """Writes nan_analyze_{timestamp}.json into output_dir; returns its path."""
    output_dir = make_dir(output_dir, what="output_path")
    path = os.path.join(output_dir, f"{REPORT_PREFIX}_{timestamp or time.strftime('%Y%m%d%H%M%S')}.json")
    atomic_write_json(path, report)
    return path
