"""First divergence: the call where two fingerprint (or md5) dumps of the same program first part, and why.

    report = find_first_divergence("run_b/", "run_a/", "./out")   # dump roots, step dirs or dump.json files
    report["call"], report["class"], report["stack"]            # also written to ./out/first_divergence.json

Two runs of the same code are compared call by call in execution order (the order of dump.json: forward, then
backward; parameter gradients last, as they are complete only after the backward). First the call sequences
must be the same: else the first position where they part is named (class "sequence"), and only the calls
before it are compared. Each call whose fingerprints differ gets a class:

- "origin": every input (arguments, parameters) is bit-identical and an output is not: this call computed
  differently (a non-deterministic kernel, another library or thread count, another random state).
- "random": the first random call (dropout, randn...) whose random-number state, recorded by the RNG audit
  (the dump's `rng` key, see rng_audit.py), differs: the random streams parted before it, whatever its
  tensors show. Later random calls, whose states then differ too, count as propagated.
- "parameter": a module parameter differs, and no earlier dumped call produced it.
- "input": an input differs that no earlier dumped call produced (the data, or state changed outside the
  dump).
- "propagated": the differing inputs are outputs of earlier calls (or, after the first difference, of calls
  the dump does not show), the differing output is an earlier call's output passed on (as a module passes
  on its last inner call's result), or it is the backward of a forward call that differed (whose saved
  tensors are hidden inputs): it only carries a difference on.

The first call of class origin/random/parameter/input is the origin of the divergence. Each dump.json pair
gives one record (step, rank, call, class, stack, ...); for several ranks or steps, first_divergence.json
holds the earliest record (smallest step, then earliest call position) at its top level and every record
under "ranks".
"""
import json
import os
import re
from typing import Any, Dict, List, Optional, Tuple

from msprobe.core.compare.rank_pairs import find_rank_pairs
from msprobe.core.errors import CompareError
from msprobe.core.log import logger
from msprobe.core.naming import backward_of
from msprobe.core.paths import check_path, make_dir

__all__ = ["FINGERPRINT_KEYS", "is_fingerprint_dump", "diverge", "find_first_divergence", "write_report",
           "SOURCE_CLASSES", "fingerprint_record", "report_records"]

FINGERPRINT_KEYS = ("xor", "md5")  # preferred first
SOURCE_CLASSES = ("origin", "random", "parameter", "input")
_INPUT_SECTIONS = ("input_args", "input_kwargs", "input", "parameters")
_OUTPUT_SECTIONS = ("output",)
_GRADS = ".parameters_grad"
REPORT_NAME = "first_divergence.json"


def _leaves(node, path, key, out):
    """(path, fingerprint) of every tensor descriptor under node, in order."""
    if isinstance(node, dict):
        if "type" in node and key in node:
            out.append((path, node[key]))
            return
        for name, child in node.items():
            _leaves(child, f"{path}.{name}" if path else str(name), key, out)
    elif isinstance(node, list):
        for i, child in enumerate(node):
            _leaves(child, f"{path}.{i}" if path else str(i), key, out)


class MalformedFingerprint(ValueError):
    """A fingerprint that is not a string (or integer) as the dump writes it."""


def _checked(name, found):
    for path, fingerprint in found:
        if isinstance(fingerprint, bool) or not isinstance(fingerprint, (str, int)):
            raise MalformedFingerprint(f"entry '{name[:120]}' has a {type(fingerprint).__name__} where its "
                                       f"{path} fingerprint should be a string")
    return found


def _sides(name, body, key) -> Tuple[list, list]:
    """(inputs, outputs) of one dump entry as [(path, fingerprint)]."""
    inputs: list = []
    outputs: list = []
    if name.endswith(_GRADS):  # {param: [grad]}: the gradients are the entry's results
        _leaves(body, "", key, outputs)
        return inputs, _checked(name, outputs)
    for section in _INPUT_SECTIONS:
        if section in body:
            _leaves(body[section], section, key, inputs)
    for section in _OUTPUT_SECTIONS:
        if section in body:
            _leaves(body[section], section, key, outputs)
    return _checked(name, inputs), _checked(name, outputs)


def fingerprint_key(data: dict) -> Optional[str]:
    """'xor' or 'md5' when the dump's tensors carry that fingerprint, else None."""
    for key in FINGERPRINT_KEYS:
        for body in data.values():
            found: list = []
            _leaves(body, "", key, found)
            if found:
                return key
    return None


def is_fingerprint_dump(path: str) -> bool:
    # the first tensor descriptor carries the key: a look at the file's head spares compare a second full parse
    # of every statistics dump
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            head = handle.read(1 << 18)
    except OSError:
        return False
    if not any(f'"{key}":' in head for key in FINGERPRINT_KEYS):
        return False
    return fingerprint_key(_read(path).get("data", {})) is not None


def _read(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError) as error:
        raise CompareError(f"cannot read dump file '{path}': {error}") from None


def _stack_lines(dump_json, call):
    """The call's stack from the stack.json beside dump.json (both layouts), or []."""
    path = os.path.join(os.path.dirname(dump_json), "stack.json")
    if not call or not os.path.isfile(path):
        return []
    raw = _read(path)
    if call in raw and isinstance(raw[call], list):
        return [str(line) for line in raw[call]]
    for value in raw.values():
        if isinstance(value, list) and len(value) == 2 and isinstance(value[0], list) and call in value[0]:
            return [str(line) for line in value[1]] if isinstance(value[1], list) else [str(value[1])]
    return []


def _ordered(data: dict) -> List[str]:
    names = [n for n in data if not n.endswith(_GRADS)]
    return names + [n for n in data if n.endswith(_GRADS)]


def _differing(a, b) -> List[str]:
    if [p for p, _ in a] != [p for p, _ in b]:
        return sorted({p for p, _ in a} ^ {p for p, _ in b}) or [p for p, _ in a]
    return [pa for (pa, fa), (_, fb) in zip(a, b) if fa != fb]


def _parameters(data, key) -> Dict[str, str]:
    """fingerprint -> "module.path.name" for every parameter of a module entry (L0 / mix dumps)."""
    found: Dict[str, str] = {}
    for name, body in data.items():
        if isinstance(body, dict) and isinstance(body.get("parameters"), dict):
            module = ".".join(name.split(".")[1:-3])  # Module.{path}.{Class}.forward.{n}
            for param, desc in body["parameters"].items():
                if isinstance(desc, dict) and isinstance(desc.get(key), (str, int)):
                    found.setdefault(desc[key], f"{module}.{param}" if module else param)
    return found


def _classify(name, body_a, body_b, ins, outs, context) -> Tuple[str, str]:
    """(class, why) of one call whose fingerprints differ. context: produced_a/_b (fingerprint -> earlier
    call), params (fingerprint -> parameter name, both runs), named_params (parameter name -> the call that
    named it: a module entry listing it again only propagates), forward_differs (the forward of a backward
    call differed: its saved tensors, hidden inputs, may too), first (the first differing call so far)."""
    (in_a, in_b), (out_a, out_b) = ins, outs
    produced_a, produced_b, params, first = (context["produced_a"], context["produced_b"], context["params"],
                                             context["first"])
    rng_a, rng_b = body_a.get("rng"), body_b.get("rng")
    if rng_a != rng_b:
        return "random", "random-number state differs as the call begins (RNG audit)"
    if context["forward_differs"]:
        return "propagated", "its forward call differed (the tensors it saved for the backward may too)"
    bad_in = _differing(in_a, in_b)
    if not bad_in:
        fa, fb = dict(out_a), dict(out_b)
        for path in _differing(out_a, out_b):
            if fa.get(path) in produced_a and fb.get(path) in produced_b:
                return "propagated", f"its output {path} is the output of {produced_a[fa[path]]}, passed on"
        return "origin", "inputs bit-identical, output differs"
    fa, fb = dict(in_a), dict(in_b)
    for path in bad_in:
        if fa.get(path) not in produced_a or fb.get(path) not in produced_b:
            parameter = params.get(fa.get(path)) or params.get(fb.get(path))
            if parameter is not None and parameter in context["named_params"]:  # the module entry, after its calls
                return "propagated", f"{path} is parameter {parameter}, named at {context['named_params'][parameter]}"
            if parameter is not None:
                context["named_params"][parameter] = name
                return "parameter", f"{path} is parameter {parameter}, which differs"
            if first is not None:  # made by a call the dump does not show (a view, an internal op)
                return "propagated", f"{path} differs, after the divergence at {first}"
            kind = "parameter" if path.startswith("parameters.") else "input"
            return kind, f"{path} differs and no earlier dumped call produced it"
    return "propagated", "differing inputs " + ", ".join(bad_in[:4]) + " come from earlier calls"


def diverge(dump_a: dict, dump_b: dict) -> dict:
    """Compare two dump.json contents (run under test, good run). Returns a record without step/rank/stack:
    {"key", "calls_compared", "sequence_same", "call", "class", "why", "position", "first_difference",
     "differing_inputs", "differing_outputs", "origins", "propagated"}."""
    data_a, data_b = dump_a.get("data", {}), dump_b.get("data", {})
    key = fingerprint_key(data_a)
    if key is None or fingerprint_key(data_b) != key:
        raise CompareError("first divergence needs two dumps with the same fingerprint: statistics task with "
                           "summary_mode 'xor' (or 'md5') on both runs.")
    names_a, names_b = _ordered(data_a), _ordered(data_b)
    parted = next((i for i, (x, y) in enumerate(zip(names_a, names_b)) if x != y), None)
    if parted is None and len(names_a) != len(names_b):
        parted = min(len(names_a), len(names_b))
    common = names_a if parted is None else names_a[:parted]
    record: Dict[str, Any] = {"key": key, "calls_compared": len(common), "sequence_same": parted is None, "call": None,
              "class": None, "why": "every compared call is bit-identical", "position": None,
              "first_difference": None, "origins": [], "propagated": 0}
    params = {**_parameters(data_b, key), **_parameters(data_a, key)}
    rng_parted = None
    named_params: Dict[str, str] = {}
    forward_of = {backward_of(n): n for n in common if backward_of(n) != n}
    differed = set()
    produced_a: Dict[str, str] = {}
    produced_b: Dict[str, str] = {}
    for position, name in enumerate(common):
        body_a, body_b = data_a[name] or {}, data_b[name] or {}
        in_a, out_a = _sides(name, body_a, key)
        in_b, out_b = _sides(name, body_b, key)
        if in_a != in_b or out_a != out_b or body_a.get("rng") != body_b.get("rng"):
            context = {"produced_a": produced_a, "produced_b": produced_b, "params": params,
                       "named_params": named_params,
                       "first": record["first_difference"], "forward_differs": forward_of.get(name) in differed}
            kind, why = _classify(name, body_a, body_b, (in_a, in_b), (out_a, out_b), context)
            differed.add(name)
            if kind == "random" and rng_parted is not None:
                kind, why = "propagated", f"the random streams parted earlier, at {rng_parted}"
            elif kind == "random":
                rng_parted = name
            if record["first_difference"] is None:
                record["first_difference"] = name
            if kind in SOURCE_CLASSES:
                record["origins"].append({"call": name, "class": kind, "why": why, "position": position})
                if record["call"] is None:
                    record.update(call=name, position=position, **{"class": kind}, why=why,
                                  differing_inputs=_differing(in_a, in_b), differing_outputs=_differing(out_a, out_b))
            else:
                record["propagated"] += 1
        for _, value in out_a:
            produced_a.setdefault(value, name)
        for _, value in out_b:
            produced_b.setdefault(value, name)
    if parted is not None:
        record["sequence"] = {"position": parted, "call": _at(names_a, parted), "bench_call": _at(names_b, parted)}
        if record["call"] is None:
            record.update(call=_at(names_a, parted) or _at(names_b, parted), position=parted,
                          why=f"the call sequences part here: this run has {_at(names_a, parted)}, "
                              f"the bench run {_at(names_b, parted)}", **{"class": "sequence"})
    return record


def _at(names, index):
    return names[index] if index < len(names) else None


_STEP = re.compile(r"^step(\d+)$")
_RANK = re.compile(r"^rank(\d*)$")


def _step_rank(dump_json) -> Tuple[Optional[int], Optional[int]]:
    rank_dir = os.path.dirname(os.path.abspath(dump_json))
    rank = _RANK.match(os.path.basename(rank_dir))
    step = _STEP.match(os.path.basename(os.path.dirname(rank_dir)))
    return (int(step.group(1)) if step else None,
            int(rank.group(1)) if rank and rank.group(1) else (0 if rank else None))


def pair_record(npu_json: str, bench_json: str) -> dict:
    """The record of one dump.json pair, with step, rank and the stack of the named call."""
    try:
        record = diverge(_read(npu_json), _read(bench_json))
    except MalformedFingerprint as exc:
        raise CompareError(f"'{npu_json}' or '{bench_json}': {exc}.") from None
    step, rank = _step_rank(npu_json)
    return {"step": step, "rank": rank, **record, "stack": _stack_lines(npu_json, record["call"]),
            "dump": npu_json, "bench_dump": bench_json}


def _earliest(records):
    named = [r for r in records if r["call"] is not None]
    if not named:
        return None
    return min(named, key=lambda r: (r["step"] if r["step"] is not None else -1, r["position"],
                                     r["rank"] if r["rank"] is not None else -1))


def terminal_line(record) -> str:
    where = f"step {record['step']} rank {record['rank']}"
    if record["call"] is None:
        return f"first divergence ({where}): none, {record['calls_compared']} calls bit-identical"
    return f"first divergence ({where}): {record['call']} [{record['class']}] {record['why']}"


def write_report(records: List[dict], output_dir: str) -> Tuple[str, dict]:
    """first_divergence.json: the earliest record's fields at the top level, all records under "ranks"."""
    earliest = _earliest(records)
    top = dict(earliest) if earliest is not None else {"call": None, "class": None, "step": None, "rank": None,
                                                          "why": "every compared call is bit-identical"}
    top["ranks"] = records
    path = os.path.join(output_dir, REPORT_NAME)
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(top, handle, indent=1)
    return path, top


def fingerprint_record(npu_json: str, bench_json: str) -> Optional[dict]:
    """pair_record of a pair of fingerprint dumps; None for other dumps. A Ray task makes it on the node that
    holds the pair, for report_records on the driver."""
    if is_fingerprint_dump(npu_json) and is_fingerprint_dump(bench_json):
        return pair_record(npu_json, bench_json)
    return None


def report_pairs(pairs, output_dir: str) -> Optional[dict]:
    """For [(npu dump.json, bench dump.json)] of fingerprint dumps: write the report, print a line per rank
    and the earliest; None (nothing written) when the dumps carry no fingerprints."""
    if not pairs or not (is_fingerprint_dump(pairs[0][0]) and is_fingerprint_dump(pairs[0][1])):
        return None
    return report_records([pair_record(n, b) for n, b in pairs], output_dir)


def report_records(records: List[dict], output_dir: str) -> dict:
    """Write first_divergence.json of the pairs' records, print a line per rank and the earliest."""
    for record in records:
        logger.info("%s", terminal_line(record))
    path, top = write_report(records, output_dir)
    if len(records) > 1 and top.get("call") is not None:
        logger.info("earliest %s", terminal_line(top))
    logger.info("first divergence written to %s", path)
    return top


def find_first_divergence(npu_path: str, bench_path: str, output_dir: str) -> dict:
    """The first divergence of the run under test (npu_path) from the good run (bench_path): dump.json files,
    step directories or dump roots. Writes first_divergence.json into output_dir and returns its content."""
    npu_path = check_path(npu_path, what="npu_path", allow_symlink=True)
    bench_path = check_path(bench_path, what="bench_path", allow_symlink=True)
    output_dir = make_dir(output_dir, what="output_path")
    if os.path.isfile(npu_path):
        pairs = [(npu_path, bench_path)]
    else:
        pairs = [(n, b) for _, n, b in find_rank_pairs(npu_path, bench_path)]
    top = report_pairs(pairs, output_dir)
    if top is None:
        raise CompareError("first divergence needs fingerprint dumps: dump both runs with the statistics task and "
                           "summary_mode 'xor' (or 'md5').")
    return top
