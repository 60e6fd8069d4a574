"""Compare two grad_probe dumps: per-step direction similarity of every parameter, and the first step they part ways.

    GradComparator.compare_distributed(dump_path1, dump_path2, output_path)   # every rank{r}/ in both
    GradComparator.compare(rank_dir1, rank_dir2, output_path)                 # one rank

Output per rank: `{out}/rank{r}/similarities.csv` (UTF-8 BOM; 1.2.1's layout: first row `step,<steps...>`,
one row per parameter, then `summary`), beside it `first_divergent_steps.csv` (`name,first_divergent_step,
similarity` per parameter and summary, the worst first) and `similarities_picture/{param}_similarities.png`
plus `summary_similarities.png`. Similarity = fraction of elements whose directions (grad > 0) agree;
the summary weights parameters by element count. A step diverges when the similarity at the first step is
below 0.97 or drops by more than 0.03 from one step to the next (the reference's rule of thumb).
L0 dumps have no direction files: their MD5 columns are compared instead (`md5_comparison.csv`).
"""
import math
import os
import re
from dataclasses import dataclass, field

import numpy as np

from msprobe.core.errors import CompareError, ParseError
from msprobe.core.log import logger
from msprobe.core.monitor.files import ensure_dir, read_csv_rows, save_figure, write_csv
from msprobe.core.paths import check_path, make_dir, safe_name

__all__ = ["GradComparator", "CompareOutcome", "first_divergent_step", "ranked_divergence", "FIRST_STEP_MIN",
           "MAX_DROP", "FIRST_DIVERGENT_CSV"]

FIRST_STEP_MIN = 0.97
MAX_DROP = 0.03
FIRST_DIVERGENT_CSV = "first_divergent_steps.csv"
_STEP_DIR = re.compile(r"^step(\d+)$")
_SUMMARY_FILE = re.compile(r"^grad_summary_(\d+)\.csv$")
_RANK_DIR = re.compile(r"^rank(\d+)$")


def first_divergent_step(steps: list, similarities: list, first_min: float = FIRST_STEP_MIN,
                         max_drop: float = MAX_DROP):
    """The first step whose similarity is < first_min (first step) or dropped by > max_drop; None if none."""
    previous = None
    for step, value in zip(steps, similarities):
        if value is None or math.isnan(value):
            continue
        if previous is None:
            if value < first_min:
                return step
        elif previous - value > max_drop:
            return step
        previous = value
    return None


@dataclass
class CompareOutcome:
    """Result of one rank's comparison (also written as CSV)."""
    mode: str                                       # "direction" or "md5"
    steps: list
    params: list
    values: dict = field(default_factory=dict)      # param -> list per step (similarity, or 1.0/0.0 md5 equality)
    summary: list = field(default_factory=list)
    first_divergent: dict = field(default_factory=dict)  # param or "summary" -> step or None
    output_dir: str = ""


def _steps_with_dirs(rank_dir: str) -> set:
    return {int(m.group(1)) for m in map(_STEP_DIR.match, os.listdir(rank_dir)) if m and
            os.path.isdir(os.path.join(rank_dir, m.group(0)))}


def _summary_steps(rank_dir: str) -> set:
    return {int(m.group(1)) for m in map(_SUMMARY_FILE.match, os.listdir(rank_dir)) if m}


def _read_summary(rank_dir: str, step: int) -> tuple:
    path = os.path.join(rank_dir, f"grad_summary_{step}.csv")
    rows = read_csv_rows(path, what="grad_probe summary")
    if not rows or not rows[0] or rows[0][0] != "param_name" or not {"max", "min", "norm"} <= set(rows[0]):
        raise ParseError(f"grad_probe summary '{path}' has no param_name,...,max,min,norm header; "
                         "is it a grad_summary file written by grad_probe?")
    return rows[0], rows[1:]


_DIRECTION_LIMIT = 2 ** 34  # elements of one direction file read at most (16 GiB of bools)


def _load_direction(path: str):
    """A direction file (bool .npy) or None when absent; anything else is one ParseError line.

    The header is read first: a pickled array, a dtype that is not bool or a shape of more than
    _DIRECTION_LIMIT elements (a 2^40-element header would ask for a terabyte) is refused before any data."""
    if not os.path.isfile(path):
        return None
    try:
        with open(path, "rb") as handle:
            version = np.lib.format.read_magic(handle)
            read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                           else np.lib.format.read_array_header_2_0)
            shape, _, dtype = read_header(handle)
    except (OSError, ValueError, SyntaxError, TypeError) as exc:
        raise ParseError(f"grad_probe direction file '{path}' is not a .npy file ({exc}).") from None
    if dtype.hasobject or dtype != np.bool_:
        raise ParseError(f"grad_probe direction file '{path}' holds {dtype}, not bool: "
                         "is it a file written by grad_probe?")
    if math.prod(shape) > _DIRECTION_LIMIT:
        raise ParseError(f"grad_probe direction file '{path}' claims shape {shape}, more than "
                         f"{_DIRECTION_LIMIT} elements.")
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError, MemoryError) as exc:
        raise ParseError(f"grad_probe direction file '{path}' cannot be read ({type(exc).__name__}: {exc}).") from None


class GradComparator:
    """Direction similarity of two grad_probe dumps (see the module docstring)."""

    @classmethod
    def compare_distributed(cls, dump_path1: str, dump_path2: str, output_path: str) -> dict:
        """Compare every rank{r}/ present in both dumps; returns {rank: CompareOutcome}."""
        dir1 = check_path(dump_path1, kind="dir", what="dump_path1")
        dir2 = check_path(dump_path2, kind="dir", what="dump_path2")
        ranks1 = {int(m.group(1)) for m in map(_RANK_DIR.match, os.listdir(dir1)) if m}
        ranks2 = {int(m.group(1)) for m in map(_RANK_DIR.match, os.listdir(dir2)) if m}
        ranks = sorted(ranks1 & ranks2)
        if not ranks:
            raise CompareError(f"no rank{{N}} directory present in both '{dir1}' and '{dir2}'; "
                               "give the dump_path of two grad_probe runs.")
        for missing in sorted(ranks1 ^ ranks2):
            logger.warning(f"grad compare: rank{missing} is only in one of the dumps; skipped.")
        return {rank: cls.compare(os.path.join(dir1, f"rank{rank}"), os.path.join(dir2, f"rank{rank}"),
                                  os.path.join(output_path, f"rank{rank}"))
                for rank in ranks}

    @classmethod
    def compare(cls, rank_dir1: str, rank_dir2: str, output_path: str) -> CompareOutcome:
        """Compare one rank's dumps and write the CSV and pictures into `output_path`."""
        dir1 = check_path(rank_dir1, kind="dir", what="rank directory 1")
        dir2 = check_path(rank_dir2, kind="dir", what="rank directory 2")
        out = make_dir(output_path, what="output_path")
        summary_steps = sorted(_summary_steps(dir1) & _summary_steps(dir2))
        if not summary_steps:
            raise CompareError(f"no grad_summary_{{step}}.csv of the same step in '{dir1}' and '{dir2}'; "
                               "are these grad_probe rank directories of runs with overlapping 'step' lists?")
        header1, _ = _read_summary(dir1, summary_steps[0])
        header2, _ = _read_summary(dir2, summary_steps[0])
        md5_1, md5_2 = "MD5" in header1, "MD5" in header2
        if md5_1 != md5_2:
            raise CompareError("one dump was taken at grad_level L0 (MD5, no direction files) and the other at "
                               "L1/L2; dump both runs with the same grad_level.")
        if md5_1:
            outcome = cls._compare_md5(dir1, dir2, summary_steps, out)
        else:
            direction_steps = sorted(_steps_with_dirs(dir1) & _steps_with_dirs(dir2))
            if not direction_steps:
                raise CompareError(f"no step{{N}}/ direction folder of the same step in '{dir1}' and '{dir2}'.")
            outcome = cls._compare_directions(dir1, dir2, direction_steps, out)
        outcome.output_dir = out
        _print_verdict(outcome, out)
        return outcome

    @staticmethod
    def _compare_directions(dir1: str, dir2: str, steps: list, out: str) -> CompareOutcome:
        _, rows = _read_summary(dir1, steps[0]) if os.path.isfile(
            os.path.join(dir1, f"grad_summary_{steps[0]}.csv")) else ([], [])
        params = [row[0] for row in rows if row]
        if not params:  # no summary beside the direction files: take the file names
            params = sorted(name[:-4] for name in os.listdir(os.path.join(dir1, f"step{steps[0]}")) if name.endswith(".npy"))
        outcome = CompareOutcome(mode="direction", steps=steps, params=params)
        outcome.values = {p: [] for p in params}
        for step in steps:
            agree_total = count_total = 0
            for param in params:
                file_name = f"{safe_name(param)}.npy"
                a = _load_direction(os.path.join(dir1, f"step{step}", file_name))
                b = _load_direction(os.path.join(dir2, f"step{step}", file_name))
                if a is None or b is None or a.shape != b.shape or a.size == 0:
                    if a is not None and b is not None and a.shape != b.shape:
                        logger.warning(f"grad compare: {param} has shape {a.shape} vs {b.shape} at step {step}; skipped.")
                    outcome.values[param].append(float("nan"))
                    continue
                agree = int(np.count_nonzero(a == b))
                outcome.values[param].append(agree / a.size)
                agree_total += agree
                count_total += a.size
            outcome.summary.append(agree_total / count_total if count_total else float("nan"))
        for param in params:
            outcome.first_divergent[param] = first_divergent_step(steps, outcome.values[param])
        outcome.first_divergent["summary"] = first_divergent_step(steps, outcome.summary)
        _write_table(os.path.join(out, "similarities.csv"), outcome)
        _write_divergence(os.path.join(out, FIRST_DIVERGENT_CSV), outcome)
        _plot_similarities(outcome, os.path.join(out, "similarities_picture"))
        return outcome

    @staticmethod
    def _compare_md5(dir1: str, dir2: str, steps: list, out: str) -> CompareOutcome:
        md5s = {}
        params = []
        for which, directory in enumerate((dir1, dir2)):
            for step in steps:
                header, rows = _read_summary(directory, step)
                column = header.index("MD5")
                for row in rows:
                    md5s[(which, step, row[0])] = row[column]
                    if which == 0 and row[0] not in params:
                        params.append(row[0])
        outcome = CompareOutcome(mode="md5", steps=steps, params=params)
        for param in params:
            series = []
            for step in steps:
                a, b = md5s.get((0, step, param)), md5s.get((1, step, param))
                series.append(float("nan") if a is None or b is None else float(a == b))
            outcome.values[param] = series
            outcome.first_divergent[param] = next((s for s, v in zip(steps, series) if v == 0.0), None)
        for i in range(len(steps)):
            known = [outcome.values[p][i] for p in params if not math.isnan(outcome.values[p][i])]
            outcome.summary.append(float(all(known)) if known else float("nan"))
        outcome.first_divergent["summary"] = next((s for s, v in zip(steps, outcome.summary) if v == 0.0), None)
        _write_table(os.path.join(out, "md5_comparison.csv"), outcome)
        _write_divergence(os.path.join(out, FIRST_DIVERGENT_CSV), outcome)
        return outcome


def _cell(value) -> str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else repr(float(value))


def _write_table(path: str, outcome: CompareOutcome) -> None:
    """1.2.1's table: `step,<steps...>`, one row per parameter, then `summary` (no extra column)."""
    rows = [[name, *(_cell(v) for v in series)]
            for name, series in [*outcome.values.items(), ("summary", outcome.summary)]]
    write_csv(path, ["step", *outcome.steps], rows, bom=True)


def _value_at(outcome: CompareOutcome, name: str, step):
    series = outcome.summary if name == "summary" else outcome.values[name]
    return series[outcome.steps.index(step)]


def ranked_divergence(outcome: CompareOutcome) -> list:
    """[(step, value at that step, name)] of the parameters that diverge: earliest step first, and at one
    step the lowest similarity (the worst) first; parameters that never diverge are left out."""
    ranked = []
    for name, step in outcome.first_divergent.items():
        if step is not None and name != "summary":
            value = _value_at(outcome, name, step)
            ranked.append((step, value if not math.isnan(value) else 2.0, name))
    return [(step, value, name) for step, value, name in sorted(ranked)]


def _write_divergence(path: str, outcome: CompareOutcome) -> None:
    """first_divergent_steps.csv: every parameter and the summary, diverging ones first (worst first)."""
    diverging = ranked_divergence(outcome)
    listed = {name for _, _, name in diverging}
    rows = [[name, step, _cell(value)] for step, value, name in diverging]
    rows += [[name, "", ""] for name in outcome.values if name not in listed]
    first = outcome.first_divergent.get("summary")
    rows.append(["summary", "" if first is None else first, "" if first is None else _cell(
        _value_at(outcome, "summary", first))])
    write_csv(path, ["name", "first_divergent_step", "similarity"], rows, bom=True)


def _plot_similarities(outcome: CompareOutcome, picture_dir: str) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        logger.warning("grad compare: matplotlib is not installed; similarities.csv written without pictures.")
        return
    ensure_dir(picture_dir)
    for name, series in [*outcome.values.items(), ("summary", outcome.summary)]:
        fig, ax = plt.subplots(figsize=(6, 3.5))
        ax.plot(outcome.steps, series, marker="o", markersize=3)
        first = outcome.first_divergent.get(name)
        if first is not None:
            ax.axvline(first, color="red", linestyle="--", label=f"first divergent step {first}")
            ax.legend(loc="lower left")
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("step")
        ax.set_ylabel("direction similarity")
        ax.set_title(name)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        save_figure(fig, os.path.join(picture_dir, f"{safe_name(name)}_similarities.png"), dpi=80)
        plt.close(fig)


def _print_verdict(outcome: CompareOutcome, out: str) -> None:
    what = "MD5 equality" if outcome.mode == "md5" else "direction similarity"
    diverging = ranked_divergence(outcome)
    if not diverging and outcome.first_divergent.get("summary") is None:
        logger.info(f"grad compare: no divergent step by {what} over steps {outcome.steps[0]}..{outcome.steps[-1]} "
                    f"({len(outcome.params)} parameters); results in {out}")
        return
    first_step = diverging[0][0] if diverging else outcome.first_divergent["summary"]
    # the worst parameters of that step first, with their value: the one to look at is never "and N more"
    names = [f"{name} ({value:.4g})" if value <= 1.0 else name
             for step, value, name in diverging if step == first_step]
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more (see {FIRST_DIVERGENT_CSV})"
                                    if len(names) > 5 else "")
    logger.info(f"grad compare: first divergent step {first_step} by {what}: {shown or 'summary'}; "
                f"results in {out}")
