"""Across steps: step N's differences judged against step N-1's update before anything else is blamed.

After one optimizer step every port's parameters differ: Adam turns a gradient that is zero up to rounding into a
full ±lr step of random sign, and every later forward, backward and optimizer call reads weights that differ
element by element (which statistics cannot show). So at step N >= 1:

- with step N-1 dumped for the same pair, step N-1 is judged first (its own parameter differences presumed to
  come from step N-2's update, one level deep). When it names nothing (its gradients and optimizer calls within
  tolerance, amplified rounding or consequences), step N's differences are presumed its update's consequences:
  no parameter and no call whose inputs' statistics agree is named for differing, and the cause is looked for among
  the rest (a differing float argument such as a wrong lr or weight decay, a call that returns nothing to compare
  with such an argument). When step N-1 names a suspect, step N's verdict stands and says so.
- with step N-1 not dumped, step N's verdict stands and says that the parameters may differ through the previous
  update, and how to check.

A fault at step k is named at step k where the dump shows it (a differing argument of the optimizer call), and at
step k+1 as the parameter it changed (the update of step k carries a difference of its own). Judging step N-1
takes a second compare, and only where step N has a suspect.
"""
import contextvars
import os

import numpy as np

from msprobe.core.compare.advisor import find_suspect
from msprobe.core.compare.records import PHASES
from msprobe.core.dump_paths import folder_number

__all__ = ["judge_step", "judge_across", "previous_dumps", "step_of"]

_JUDGING_PREVIOUS = contextvars.ContextVar("msprobe_judging_previous_step", default=False)


def step_of(dump_json):
    """N of a `.../step{N}/{rank}/dump.json` path; None where the folders name no step."""
    number = folder_number(os.path.basename(os.path.dirname(os.path.dirname(os.path.abspath(dump_json)))), "step")
    return int(number) if number is not None else None


def previous_dumps(npu_json, bench_json):
    """(NPU, bench) dump.json of the step before, same rank folders; None when either side lacks it."""
    found = []
    for path in (npu_json, bench_json):
        step = step_of(path) if path else None
        if not step:
            return None
        rank_dir = os.path.dirname(os.path.abspath(path))
        root = os.path.dirname(os.path.dirname(rank_dir))
        candidate = os.path.join(root, f"step{step - 1}", os.path.basename(rank_dir), os.path.basename(path))
        if not os.path.isfile(candidate):
            return None
        found.append(candidate)
    return tuple(found)


def presume_previous_update(records):
    """Judge `records` again with its parameter differences presumed to come from the previous step's update."""
    records.extra["previous_update"] = True
    records.suspect = find_suspect(records)
    return records.suspect


def judge_across(records, previous, step):
    """The suspect of step `step`'s `records` (already judged) given step N-1's records `previous` (judged
    by `judge_previous`; None: step N-1 was not dumped). Notes the outcome in records.extra['across_steps']."""
    suspect = records.suspect
    if suspect is None or not step or _own_argument(suspect):
        return suspect
    if previous is None:
        note = (f"step {step}: the parameters may differ through step {step - 1}'s update (Adam turns gradients "
                f"that are zero up to rounding into full lr steps); dump step {step - 1} too (config 'step': "
                f"[{step - 1}, {step}]) and compare the dump roots: step {step - 1}'s gradients and optimizer calls "
                "then explain this difference or name its cause")
        records.extra["across_steps"] = note
        suspect.summary += f". Note: {note}"
        return suspect
    if previous.suspect is not None:
        note = (f"step {step - 1}'s update does not explain it: step {step - 1} names "
                f"{previous.suspect.name} ({previous.suspect.summary})")
        records.extra["across_steps"] = note
        suspect.summary += f". Note: {note}"
        return suspect
    if not _updated_between(previous, records):
        return suspect  # nothing moved the weights between the two steps: step N is judged as step 0 is
    first = suspect.name
    found = presume_previous_update(records)
    records.extra["across_steps"] = (f"step {step}'s differences (first {first}) are presumed step {step - 1}'s "
                                     f"update's consequences: step {step - 1}'s gradients and optimizer calls "
                                     "carry no difference of their own")
    return found


def judge_previous(records, step):
    """Step N-1's own verdict, one level deep: its parameter differences presumed step N-2's update's."""
    if step and records.suspect is not None and not _own_argument(records.suspect):
        presume_previous_update(records)
    return records


def judge_step(records, compare):
    """The runner's hook: `records` of `.../step{N}/...` paths judged against step N-1's dumps where both sides
    hold them. `compare(npu_json, bench_json)` compares a pair (the runner's compare_tables on loaded dumps)."""
    if records.suspect is None or _JUDGING_PREVIOUS.get():
        return records.suspect
    step = step_of(records.npu.path) if records.npu.path else None
    if not step:
        return records.suspect
    paths = previous_dumps(records.npu.path, records.bench.path)
    previous = None
    if paths is not None:
        token = _JUDGING_PREVIOUS.set(True)
        try:
            previous = judge_previous(compare(*paths), step - 1)
        finally:
            _JUDGING_PREVIOUS.reset(token)
    return judge_across(records, previous, step)


def _updated_between(previous, records):
    """Whether an update ran between step N-1 (`previous`) and step N (`records`): a parameter's statistics changed
    from one step to the next on either side (a dump that records parameters: mix, L0); without parameter rows
    (L1), step N-1 made calls after its backward other than collectives (an optimizer step; an all_reduce of the
    gradients alone moves no weight). A job without training (an all_reduce spreading one rank's difference at
    step N) has neither, and its step N is judged as step 0 is."""
    seen_parameters = False
    for before, now in ((previous.npu, records.npu), (previous.bench, records.bench)):
        stats = {}
        for table, index in ((before, 0), (now, 1)):
            columns = table.columns
            for i, role in enumerate(columns["role"]):
                if role == "parameters":
                    stats.setdefault(columns["name"][i], [None, None])[index] = tuple(
                        columns[key][i] for key in ("max", "min", "mean", "norm"))
        both = [(a, b) for a, b in stats.values() if a is not None and b is not None]
        seen_parameters = seen_parameters or bool(both)
        if any(not _same_numbers(a, b) for a, b in both):
            return True
    if seen_parameters or previous.phases is None:
        return False
    after = np.flatnonzero(previous.phases == PHASES.index("after backward"))
    entries = [previous.entries[i] for i in after.tolist()]
    return any(isinstance(entry, str) and not entry.startswith("Distributed.") for entry in entries)


def _same_numbers(a, b):
    return all(x == y or (x != x and y != y) for x, y in zip(a, b))  # NaN (a statistic not computed) equals NaN


def _own_argument(suspect):
    """A differing argument of the suspect call is its own difference whatever the weights carry."""
    return suspect.kind == "cause" and bool(suspect.differing_arguments)
