"""Advisor: name the call that causes the first difference, say why, and what to check next.

Structure comes before values (structure.py): when the two runs differ in structure (an extra, missing
or swapped call or module, a non-tensor argument that differs beyond what a port of one model explains),
the first such difference in execution order (forward pass first) is the suspect, whatever the values
say: a call left without counterpart is never another call's counterpart, and a differing argument
counts even where every value is within tolerance. Otherwise the suspect is chosen from the dtype-aware
judgement (`tolerance`), call by call in execution order:

1. forward calls (dump order up to the first backward entry): the first call with an output beyond
   tolerance whose compared tensor inputs are all within tolerance is the cause, provided the output's
   excess is its own: more than AMPLIFICATION (4) times the largest difference of the same statistic
   among its inputs (squaring, exp or a subtraction may amplify rounding that was within tolerance).
   A call whose inputs already differ is a consequence and is passed over.
2. only when every forward row passes: backward calls in dump (= backward execution) order, by the same
   rule, then parameter gradients (last module first, as backward computes them);
3. then forward calls recorded after the backward pass (the optimizer step).

When no call qualifies and the first differing row of a phase is an input, that input is named and the
text says that it already differed (the data, the weights or something not dumped). In the forward
pass the first differing input ends the search (later calls read what follows from it); after amplified
rounding only a module's parameter row qualifies (no forward call computes a parameter). A differing
non-tensor argument of the chosen call is reported with it. Rows that could not be compared are never suspects
and never count as agreeing inputs; the text lists them, and says "no suspect among the compared rows"
instead of "all rows pass" when some rows could not be compared. Written as `advisor_{timestamp}.txt`:

    Line: <0-based report row>
    Suspect Nodes: <row name>
    Reason: <what was checked and what differs>
    Expert Advice: <numbered hints>
"""
from dataclasses import dataclass, field
from typing import List

import numpy as np

from msprobe.core.compare.reasons import Reason, reason_in
from msprobe.core.compare.records import PHASES
from msprobe.core.compare.structure import structural_differences
from msprobe.core.compare.tolerance import AMPLIFICATION
from msprobe.core.naming import parse_name
from msprobe.core.paths import atomic_write_bytes

__all__ = ["Suspect", "find_suspect", "advisor_text", "write_advisor", "advice_for", "STRUCTURAL_KINDS"]

STRUCTURAL_KINDS = ("extra", "missing", "swapped", "argument", "dtype")

_ADVICE = {
    "cause": ("1. The inputs agree but the output does not: this API (or module) itself computes "
              "differently on the two sides.\n"
              "2. Compare its implementation or kernel, its dtype (mixed precision, fused ops) and any "
              "non-deterministic setting; a differing argument listed above may be the whole story.\n"
              "3. Reproduce it alone with `msprobe -f pytorch run_ut` on the dumped inputs."),
    "input": ("1. The inputs of this call already differ and no earlier dumped call explains it: look at "
              "where they come from (the data loader, the checkpoint, a call outside the dump's scope).\n"
              "2. An in-place API may have written its result over this input after it was dumped; check "
              "the calls that share the tensor.\n"
              "3. Dump the producer again with the tensor task to confirm."),
    "parameters": ("1. The weights differ before the call: check checkpoint loading, initialisation seeds and "
                   "the optimizer step of the previous iteration.\n"
                   "2. Compare the parameters_grad rows of the previous step."),
    "parameters_grad": ("1. A parameter gradient differs while every forward and backward call passes: look at "
                        "gradient accumulation, the loss scaling and how the gradient is reduced.\n"
                        "2. Check gradient clipping and communication (all_reduce) of gradients."),
    "structure": ("1. The two runs do not make the same calls here: the model code, a patched or swapped "
                  "module, or a configuration differs between them; the values after it follow from it.\n"
                  "2. Compare the module's code (and its class) on both sides, and the framework versions.\n"
                  "3. Once the structure agrees, compare again for the values."),
    "dtype": ("1. This call computes in another dtype on the two sides while the rest of the run agrees: a "
              "cast, an autocast region or a kernel's precision setting differs around it.\n"
              "2. Check the casts before it and the precision options of the op (allow_bf16_reduced_precision, "
              "autocast scopes, the kernel's accumulation dtype)."),
    "argument": ("1. The call is made with another non-tensor argument on the two sides (a scale, an "
                 "approximation mode, a dtype, a flag): a different function of the same inputs.\n"
                 "2. Find where the argument is set (the config, a constant, a patched attribute) and make "
                 "the two sides agree; the values may still be within tolerance, the computation is not "
                 "the same."),
    "backward": ("1. The forward pass agrees; the error appears in the backward pass: this call's gradient "
                 "computation differs while the gradients it receives agree.\n"
                 "2. Check its backward kernel and any custom autograd function or hook on it."),
}


@dataclass
class Suspect:
    """The advisor's pick: report `row`, its `name`, the call (`entry`) and `phase` ('forward',
    'backward', 'parameters_grad', 'after backward'), `kind` ('cause': inputs agree, output does not;
    'input': the first difference is already in an input; a structural difference: 'extra', 'missing',
    'swapped', 'argument' or 'dtype', structure.Difference), the rows it rests on, and a one-line `summary`."""
    row: int
    name: str
    entry: str
    phase: str
    kind: str
    output_rows: List[int] = field(default_factory=list)
    agreeing_inputs: List[int] = field(default_factory=list)
    unchecked_inputs: List[int] = field(default_factory=list)
    differing_arguments: List[int] = field(default_factory=list)
    summary: str = ""


def _calls_in_order(records):
    """[(phase, entry, rows)] in the order the advisor examines them."""
    rows_of, order = {}, []
    for row, entry in enumerate(records.entries):
        key = entry if isinstance(entry, str) else repr(entry)
        if key not in rows_of:
            rows_of[key] = []
            order.append((key, PHASES[records.phases[row]]))
        rows_of[key].append(row)
    calls = {phase: [(phase, key, rows_of[key]) for key, p in order if p == phase] for phase in PHASES}
    # parameter gradients: last module first, as backward computes them
    return calls["forward"] + calls["backward"] + calls["parameters_grad"][::-1] + calls["after backward"]


def row_flags(records):
    """(bad, compared) per row: bad = beyond tolerance or NaN/Inf misplaced; compared = the row holds a
    judged tensor or a compared non-tensor value. Tensors of different shapes are not compared: two
    different calls were paired (a call sequence that differs), which is no numerical evidence."""
    judgement = records.judgement
    reason = records.reason
    bad = judgement.suspicious.copy() if judgement is not None else np.zeros(len(records), dtype=bool)
    bad |= reason == Reason.NAN_POSITION
    judged = judgement.worst >= 0 if judgement is not None else np.zeros(len(records), dtype=bool)
    compared = judged | reason_in(reason, (Reason.NAN_POSITION, Reason.NON_TENSOR, Reason.VALUE_DIFF))
    return bad, compared


def _describe(records, suspect):
    from msprobe.core.compare.render import suspicion_text

    names = records.names
    first = suspicion_text(records, suspect.row, worst_only=True) or "differs"
    if suspect.kind == "cause" and not suspect.output_rows:
        text = f"{suspect.phase} call {suspect.entry} is made with other float arguments"
    elif suspect.kind == "cause":
        text = f"{suspect.phase} call {suspect.entry}: inputs agree, {names[suspect.row][len(suspect.entry) + 1:]} "
        text += f"does not ({first})"
    else:
        text = f"{names[suspect.row]} already differs ({first}); no earlier compared call explains it"
    if suspect.differing_arguments:
        text += "; differing argument(s): " + ", ".join(names[r][len(suspect.entry) + 1:]
                                                        for r in suspect.differing_arguments)
    return text


def find_suspect(records):
    """The Suspect of `records` (tensor or statistics mode), or None when no compared row differs."""
    records.extra["amplified"], records.extra["consequence"] = [], []
    if records.mode == "md5" or len(records) == 0:
        return None
    structural = _structural_suspect(records)
    if structural is not None:
        return structural
    bad, compared = row_flags(records)
    if not bad.any() and not (records.reason == Reason.VALUE_DIFF).any():
        return None
    roles = records.roles
    names = records.names
    is_input = np.isin(roles, ["input", "parameters"])
    calls = _calls_in_order(records)
    for phase in ("forward", "backward+grads", "after backward"):
        members = [c for c in calls if (c[0] in ("backward", "parameters_grad")) == (phase == "backward+grads")
                   and (c[0] == "after backward") == (phase == "after backward")]
        suspect = _suspect_in(records, members, bad, compared, is_input, names)
        if phase == "forward":
            suspect = _prefer_parameter(records, suspect, bad & compared, names) or suspect
        if suspect is not None:  # a later phase is looked at only when every row of this one passes
            return suspect
    return None


def _structural_suspect(records):
    """The first structural difference (structure.py) as a Suspect, or None. A differing argument of a call
    whose outputs differ too is that call's cause (kind 'cause', the argument listed with it, the values
    that show it); one whose outputs stay within tolerance is named by the argument row itself."""
    differences = structural_differences(records)
    if not differences:
        return None
    first = differences[0]
    more = len(differences) - 1
    tail = f" (and {more} more structural difference{'s' if more > 1 else ''})" if more else ""
    if first.kind == "argument":
        cause = _argument_cause(records, first)
        if cause is not None:
            cause.summary += tail
            return cause
    suspect = Suspect(first.row, records.names[first.row], first.entry, PHASES[first.phase], first.kind,
                      differing_arguments=[first.row] if first.kind == "argument" else [])
    suspect.summary = "structural difference: " + first.text + tail
    return suspect


def _argument_cause(records, difference):
    """The 'cause' Suspect of a call made with a differing argument whose outputs differ, else None."""
    bad, compared = row_flags(records)
    rows = np.flatnonzero(records.entry_ids == records.entry_ids[difference.row])
    is_input = np.isin(records.roles[rows], ["input", "parameters"])
    outputs, inputs = rows[~is_input], rows[is_input]
    bad_out = outputs[bad[outputs]]
    if not len(bad_out):
        return None
    arguments = [r for r in inputs.tolist() if records.reason[r] == Reason.VALUE_DIFF]
    suspect = Suspect(int(bad_out[0]), records.names[int(bad_out[0])], difference.entry,
                      PHASES[difference.phase], "cause", bad_out.tolist(),
                      inputs[compared[inputs] & ~bad[inputs] & (records.reason[inputs] != Reason.VALUE_DIFF)].tolist(),
                      inputs[~compared[inputs]].tolist(), arguments)
    suspect.summary = _describe(records, suspect)
    return suspect


def _prefer_parameter(records, suspect, bad, names):
    """When a module's parameter differs in the forward pass, the parameter is the finding: it differs
    before any call uses it. An input named as the first difference that holds the same tensor as a
    differing parameter row (`Tensor.__mul__...input.0` of an RMSNorm: same statistics on both sides),
    or a module named as a cause that encloses a differing parameter's module (the block around a
    scaled norm), gives way to that parameter row. A differing data input stays the finding."""
    if suspect is None or ".parameters." in suspect.name or records.extra.get("previous_update"):
        return None
    rows = np.flatnonzero(bad & (records.roles == "parameters") & (records.phases == 0)
                          & np.array([".parameters." in n for n in names], dtype=bool))
    if suspect.kind == "input":
        chosen = [r for r in rows if _same_tensor(records, r, suspect.row)]
    else:
        scope = _module_path(suspect.entry)
        chosen = [r for r in rows if scope is not None and _module_path(records.entries[r]) is not None
                  and (_module_path(records.entries[r]) + ".").startswith(scope + ".")]
    if not chosen:
        return None
    row = int(chosen[0])
    found = Suspect(row, names[row], records.entries[row], "forward", "input",
                    list(suspect.output_rows) if suspect.kind == "input" else [])
    found.summary = _describe(records, found) + f" (first seen as {names[suspect.row]})"
    return found


def _module_path(entry):
    """'model.layers.1.mlp' of 'Module.model.layers.1.mlp.LlamaMLP.forward.0'; None for API calls."""
    parsed = parse_name(entry) if isinstance(entry, str) else None
    if parsed is None or not parsed.is_module or "." not in parsed.api:
        return None
    return parsed.api.rsplit(".", 1)[0]


def _same_tensor(records, row, other):
    """Both rows hold the same tensor on both sides (equal statistics, NaN equal to NaN)."""
    return all(np.array_equal(stats[row], stats[other], equal_nan=True)
               for stats in (records.npu_stats, records.bench_stats))


def _tensor_keys(records, rows):
    """The (NPU, bench) statistics of rows as hashable keys: rows with equal keys hold the same tensor."""
    return {records.npu_stats[r].tobytes() + records.bench_stats[r].tobytes() for r in rows}


def _new_error(records, out_rows, in_rows):
    """Output rows whose difference is the call's own: some check is over its allowance, over
    AMPLIFICATION times the largest score of that check among the call's tensor inputs and over what
    the operands of a contraction explain (records.extra["explained"])."""
    judgement = records.judgement
    if judgement is None:
        return out_rows
    carried = np.zeros(judgement.scores.shape[1])
    if len(in_rows):
        carried = np.nan_to_num(np.nanmax(np.where(np.isnan(judgement.scores[in_rows]), -np.inf,
                                                   judgement.scores[in_rows]), axis=0), neginf=0.0)
    with np.errstate(invalid="ignore"):
        scores = judgement.scores[out_rows]
        over = (scores > judgement.allowed[out_rows]) & (scores > AMPLIFICATION * carried)
        explained = records.extra.get("explained")
        if explained is not None:  # a contraction's cancellation (contraction.py): amplified, not a cause
            over &= ~(scores <= explained[out_rows])
    own = over.any(axis=1) | reason_in(records.reason[out_rows], (Reason.VALUE_DIFF, Reason.NAN_POSITION))
    return out_rows[own]


def _suspect_in(records, calls, bad, compared, is_input, names):
    """The first cause among `calls` (in order); else, when the first difference is an input, that
    input; else None (differences only amplify, within AMPLIFICATION, what inputs carried)."""
    first_input, amplified = None, []
    # tensors seen differing in an earlier phase without a cause (amplified rounding and what reads it)
    earlier = _tensor_keys(records, (records.extra.get("amplified") or []) + (records.extra.get("consequence") or []))
    seen, len_amplified, len_seen = set(earlier), 0, len(records.extra["consequence"])
    # a backward difference inherited from a forward one without a cause came first; or the previous step's update
    # explains this step's parameter differences (across_steps.py): what reads them is a consequence, no parameter
    # is named for differing, and a cause is looked for among the rest
    previous_update = bool(records.extra.get("previous_update"))
    inherited = previous_update
    # with the previous update explained, every parameter may differ element by element (statistics cannot show
    # it), so a call whose output differs while its inputs' statistics agree is presumed to read such a difference
    spreading = previous_update
    float_args = _float_arguments_differing(records)
    judged = records.judgement.worst >= 0 if records.judgement is not None else np.zeros(len(records), dtype=bool)
    forward_differs = {records.entries[r] for r in np.flatnonzero(bad & is_input & (records.phases == 0))}
    for phase, entry, rows in calls:
        rows = np.asarray(rows)
        outputs = rows[~is_input[rows]]
        inputs = rows[is_input[rows]]
        bad_out = outputs[bad[outputs] | (records.reason[outputs] == Reason.VALUE_DIFF)]
        bad_in = inputs[bad[inputs]]
        if float_args[inputs].any() and first_input is None and (phase == "after backward" or not judged[outputs].any()):
            # an optimizer call (after the backward pass) or a call that returns nothing to compare (torch's fused
            # optimizer steps update their lists in place) with a differing float argument (lr, weight_decay,
            # eps): its own difference, however small its effect on this step's tensors
            suspect = Suspect(int(inputs[float_args[inputs]][0]), names[int(inputs[float_args[inputs]][0])], entry,
                              phase, "cause", [], inputs[compared[inputs] & ~bad[inputs]].tolist(), [],
                              inputs[float_args[inputs]].tolist())
            suspect.summary = _describe(records, suspect)
            records.extra["consequence"].clear()
            return suspect
        if len(bad_out) and not len(bad_in) and (_forward_of(entry) in forward_differs
                                                 or spreading and not float_args[inputs].any()):
            # a backward call reads what its forward saved; that forward's inputs already differed (or, spreading,
            # the weights differ element by element since the previous update)
            records.extra["consequence"].extend(bad_out.tolist())
            inherited = True
            continue
        if len(bad_out) and not len(bad_in):
            seen.update(_tensor_keys(records, amplified[len_amplified:] + records.extra["consequence"][len_seen:]))
            len_amplified, len_seen = len(amplified), len(records.extra["consequence"])
        again = np.array([_tensor_keys(records, [r]) <= seen for r in bad_out.tolist()] if not len(bad_in) else [],
                         dtype=bool)
        if len(bad_out) and not len(bad_in) and again.any():
            # an output holding a tensor already seen differing without a cause (a module returning what
            # its last call computed): that difference again, not a new one
            records.extra["consequence"].extend(bad_out[again].tolist())
            bad_out = bad_out[~again]
            if not len(bad_out):
                continue
        changed = inputs[float_args[inputs]] if len(bad_out) and len(bad_in) else inputs[:0]
        if len(changed) and first_input is None:
            # a float argument that differs (a wrong constant) makes another function of the inputs: the
            # call's own difference, even where its inputs carry amplified rounding (a tie before it)
            suspect = Suspect(int(bad_out[0]), names[int(bad_out[0])], entry, phase, "cause", bad_out.tolist(),
                              [], [], changed.tolist())
            suspect.summary = _describe(records, suspect)
            records.extra["consequence"].clear()
            return suspect
        if len(bad_out) and not len(bad_in):
            own = _new_error(records, bad_out, inputs[compared[inputs]])
            if not len(own):
                amplified.extend(bad_out.tolist())
                continue
            args_mask = records.reason[inputs] == Reason.VALUE_DIFF
            suspect = Suspect(int(own[0]), names[int(own[0])], entry, phase, "cause", own.tolist(),
                              inputs[compared[inputs] & ~bad[inputs] & ~args_mask].tolist(),
                              inputs[~compared[inputs]].tolist(), inputs[args_mask].tolist())
            suspect.summary = _describe(records, suspect)
            records.extra["consequence"].clear()  # only rows before the cause were looked at
            return suspect
        if len(bad_in) and phase == "forward" and first_input is None:
            # the forward pass's first unexplained differing input (data, a weight, a call outside the
            # dump): what follows reads it, so a later call's difference is presumed its consequence
            # (statistics cannot show how it spreads element by element). After amplified rounding
            # only a module's parameter row qualifies (no forward call computes a parameter; an operand
            # may be the output of a call outside the dump that read the amplified difference).
            named = bad_in if not (amplified or inherited) else bad_in[records.roles[bad_in] == "parameters"]
            named = named[:0] if previous_update else named
            if len(named):
                records.extra.setdefault("amplified", []).extend(amplified)
                suspect = Suspect(int(named[0]), names[int(named[0])], entry, phase, "input", bad_out.tolist())
                suspect.summary = _describe(records, suspect)
                return suspect
        if len(bad_in):
            records.extra["consequence"].extend(bad_out.tolist() + (bad_in.tolist() if amplified or inherited else []))
            if first_input is None and not amplified and not inherited and _tensor_keys(records, bad_in) <= earlier:
                # a gradient amplified in the backward pass (or a consequence of such a difference), read
                # again by the optimizer: no new input, and what the call makes of it is a consequence
                amplified.extend(bad_in.tolist())
            elif first_input is None and not amplified and not inherited:
                first_input = (phase, entry, bad_in, bad_out)
    records.extra.setdefault("amplified", []).extend(amplified)
    if first_input is None:
        return None
    phase, entry, bad_in, bad_out = first_input
    row = int(bad_in[0])
    suspect = Suspect(row, names[row], entry, phase, "input", bad_out.tolist())
    suspect.summary = _describe(records, suspect)
    return suspect


def _float_arguments_differing(records):
    """Bool per row: a float (not int or bool) non-tensor argument whose values differ on the two sides."""
    out = np.zeros(len(records), dtype=bool)
    rows = np.flatnonzero(records.reason == Reason.VALUE_DIFF)
    if len(rows):
        npu, bench = records.column("npu", "value"), records.column("bench", "value")
        out[rows] = [isinstance(npu[r], float) and isinstance(bench[r], float) for r in rows.tolist()]
    return out


def _forward_of(entry):
    """'X.N.forward' of a backward entry 'X.N.backward' ('Module.m.C.forward.0' of 'Module.m.C.backward.0')."""
    if entry.endswith(".backward"):
        return entry[: -len("backward")] + "forward"
    head, _, tail = entry.rpartition(".backward.")
    return f"{head}.forward.{tail}" if head else None


def advice_for(suspect):
    if suspect.kind in STRUCTURAL_KINDS:
        return _ADVICE[suspect.kind if suspect.kind in ("argument", "dtype") else "structure"]
    if suspect.kind == "input":
        role = "parameters" if ".parameters." in suspect.name else "input"
        return _ADVICE[role]
    if suspect.phase == "parameters_grad":
        return _ADVICE["parameters_grad"]
    if suspect.phase == "backward":
        return _ADVICE["backward"]
    return _ADVICE["cause"]


def _checked_lines(records, suspect):
    from msprobe.core.compare.render import suspicion_text

    names = records.names
    prefix = len(suspect.entry) + 1
    if suspect.kind in STRUCTURAL_KINDS:
        return [f"  {d.text}" for d in structural_differences(records)[:8]]
    if suspect.kind == "input":
        return [f"  {names[suspect.row]}: {suspicion_text(records, suspect.row)}"]
    lines = []
    for row in suspect.output_rows[:8]:
        lines.append(f"  {names[row][prefix:]}: {suspicion_text(records, row)}")
    if suspect.agreeing_inputs:
        shown = ", ".join(f"{names[r][prefix:]} ({suspicion_text(records, r, within_note=True) or 'equal'})"
                          for r in suspect.agreeing_inputs[:6])
        lines.append(f"  inputs checked and within tolerance: {shown}")
    elif suspect.kind == "cause":
        lines.append("  no tensor input of this call could be compared: the output is the first difference seen")
    for row in suspect.differing_arguments:
        lines.append(f"  argument {names[row][prefix:]}: {suspicion_text(records, row)}")
    if suspect.unchecked_inputs:
        lines.append("  inputs not compared (no counterpart or unreadable): "
                     + ", ".join(names[r][prefix:] for r in suspect.unchecked_inputs[:6]))
    return lines


def advisor_text(records):
    """The advisor file's text for `records` (uses records.suspect, or finds it)."""
    from msprobe.core.compare.render import suspicion_text

    suspect = records.suspect if records.suspect is not None else find_suspect(records)
    unreadable = int(records.unreadable().sum())
    note = (f"\nNote: {unreadable} rows could not be compared (unreadable tensor files); see Err_message "
            "and Suspicion in the report.") if unreadable else ""
    if suspect is None:
        amplified = records.extra.get("amplified") or []
        if amplified:
            verdict = (f"No call adds a difference of its own. {len(amplified)} output rows exceed the dtype "
                       f"tolerance, each by at most {AMPLIFICATION:g} times what its inputs carried (rounding "
                       f"amplified by the operation), e.g. {records.names[amplified[0]]}: "
                       f"{suspicion_text(records, amplified[0], worst_only=True)}.")
        elif records.extra.get("across_steps"):
            verdict = "No call adds a difference of its own."
        else:
            verdict = "No compared row differs beyond what the dtypes explain."
        verdict += (f" {unreadable} rows could not be compared, so this is not a pass." if unreadable
                    else " No suspect found.")
        if records.extra.get("across_steps"):
            verdict += f" Across steps: {records.extra['across_steps']}."
        return f"Line: N/A\nSuspect Nodes: N/A\nExpert Advice: {verdict}{note}\n"
    lines = [f"Line: {suspect.row}", f"Suspect Nodes: {suspect.name}", f"Reason: {suspect.summary}"]
    lines += _checked_lines(records, suspect)
    lines.append(f"Expert Advice: {advice_for(suspect)}")
    return "\n".join(lines) + note + "\n"


def write_advisor(records, path):
    """Write the advisor text (advisor_{timestamp}.txt) to `path`; returns (path, text). Like the xlsx report
    beside it, the file is not synced to the disk (a job compare writes one a pair; a sync each cost ~3 ms)."""
    text = advisor_text(records)
    atomic_write_bytes(path, text.encode("utf-8"), durable=False)
    return path, text
