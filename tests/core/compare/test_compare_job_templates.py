"""Dump templates (templates.py): a job's ranks share one structure, so a rank's table is the template's with
its own statistics put in. Every table read through a template must equal the table read in full, and
anything but the statistics differing must send the file to the full read."""
import json
import os
import random

import numpy as np
import pytest

from msprobe.core.compare import CompareOptions, compare_dumps
from msprobe.core.io.load import ROW_COLUMNS, load_dump
from msprobe.core.compare.pair import compare_pair
from msprobe.core.compare.templates import DumpTemplates

from compare_samples import sample_dump

STATS = ("Max", "Min", "Mean", "Norm")


def _sample():
    with open(sample_dump("pytorch_statistics_mix")) as handle:
        return json.load(handle)


def _jittered(dump, seed, mild=False):
    """The dump with every float statistic replaced by another value of a varied form (mild: within 0.1 %)."""
    rng = random.Random(seed)
    forms = [lambda v: v * (1 + rng.uniform(-1e-3, 1e-3)), lambda v: -v, lambda v: v * 1e-6, lambda v: v * 1e17,
             lambda v: float(round(v)), lambda v: 5e-324, lambda v: -0.0, lambda v: 1.2345678901234567e-5]
    forms = forms[:1] if mild else forms

    def walk(node):
        if isinstance(node, dict):
            return {k: (rng.choice(forms)(v) if k in STATS and isinstance(v, float) else walk(v))
                    for k, v in node.items()}
        if isinstance(node, list):
            return [walk(item) for item in node]
        return node
    return walk(dump)


def _write(path, dump, compact=False):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        json.dump(dump, handle, separators=(",", ":") if compact else None)
    return path


def _assert_same_table(ours, full):
    assert ours.header == full.header and ours.entries == full.entries and ours.path == full.path
    for key in ROW_COLUMNS:
        if key in ("max", "min", "mean", "norm"):
            a, b = np.array(ours.columns[key], dtype=np.float64), np.array(full.columns[key], dtype=np.float64)
            assert np.array_equal(a.view(np.int64), b.view(np.int64)), key  # bit for bit, -0.0 and NaN included
            assert all(type(x) is float for x in ours.columns[key])
        else:
            assert ours.columns[key] == full.columns[key], key
    if ours.stat_array is not None:  # what records read instead of the four lists
        lists = np.array([full.columns[key] for key in ("max", "min", "mean", "norm")], dtype=np.float64).T
        assert np.array_equal(ours.stat_array.view(np.int64), lists.view(np.int64))


@pytest.mark.parametrize("compact", [False, True])
def test_ranks_read_through_a_template_equal_the_full_read(tmp_path, compact):
    templates = DumpTemplates()
    paths = [_write(str(tmp_path / f"rank{r}" / "dump.json"), _jittered(_sample(), r), compact) for r in range(5)]
    for path in paths:
        _assert_same_table(load_dump(path, templates), load_dump(path))
    assert len(templates.templates) == 1 and templates.templates[0].hits == 4
    assert len({load_dump(p, templates).structure for p in paths}) == 1


def _edits():
    """Changes that are not statistics: each must miss the template."""
    def extra_call(dump):
        entry, body = next(iter(dump["data"].items()))
        dump["data"] = {**dump["data"], entry.replace(".0.", ".7."): body}

    def shape(dump):
        next(iter(dump["data"].values()))["input_args"][0]["shape"][0] += 1

    def scalar(dump):
        for body in dump["data"].values():
            for arg in body.get("input_args", []):
                if isinstance(arg, dict) and isinstance(arg.get("value"), (int, float)) and \
                        not isinstance(arg.get("value"), bool):
                    arg["value"] = arg["value"] + 1
                    return
        raise AssertionError("the sample holds a numeric scalar argument")

    def null_statistic(dump):
        next(iter(dump["data"].values()))["input_args"][0]["Mean"] = None

    def dtype(dump):
        next(iter(dump["data"].values()))["input_args"][0]["dtype"] = "torch.float16"
    return [extra_call, shape, scalar, null_statistic, dtype]


@pytest.mark.parametrize("edit", _edits(), ids=lambda f: f.__name__)
def test_a_rank_of_another_structure_is_read_in_full(tmp_path, edit):
    templates = DumpTemplates()
    first = _write(str(tmp_path / "rank0" / "dump.json"), _jittered(_sample(), 0))
    load_dump(first, templates)
    changed = _jittered(_sample(), 1)
    edit(changed)
    path = _write(str(tmp_path / "rank1" / "dump.json"), changed)
    table = load_dump(path, templates)
    _assert_same_table(table, load_dump(path))
    assert sum(t.hits for t in templates.templates) == 0
    assert table.structure != load_dump(first, templates).structure


def test_a_statistic_beyond_float_range_is_read_in_full_with_its_message(tmp_path):
    templates = DumpTemplates()
    load_dump(_write(str(tmp_path / "rank0" / "dump.json"), _jittered(_sample(), 0)), templates)
    path = _write(str(tmp_path / "rank1" / "dump.json"), _jittered(_sample(), 1))
    with open(path) as handle:
        text = handle.read()
    first = text.index('"Max": ') + len('"Max": ')
    end = min(text.index(c, first) for c in ",}")
    with open(path, "w") as handle:
        handle.write(text[:first] + "1" + "0" * 400 + text[end:])
    from msprobe.core.errors import ParseError

    with pytest.raises(ParseError, match="beyond the float range"):
        load_dump(path, templates)


def _job(root, ranks, fault_rank, extra_rank):
    """npu/bench step0 rank dirs: jittered NPU statistics, one rank with a fault, one with an extra call."""
    for rank in range(ranks):
        bench = _jittered(_sample(), 100 + rank, mild=True)
        npu = json.loads(json.dumps(bench))
        for body in npu["data"].values():
            for out in body.get("output", []) if isinstance(body.get("output"), list) else []:
                if isinstance(out, dict) and isinstance(out.get("Max"), float):
                    for key in STATS:
                        out[key] = out[key] * (1.5 if rank == fault_rank else 1 + 1e-9)
        if rank == extra_rank:
            entry, body = next(iter(npu["data"].items()))
            npu["data"] = {**npu["data"], entry.replace(".0.", ".9."): body}
        _write(os.path.join(root, "npu", "step0", f"rank{rank}", "dump.json"), npu)
        _write(os.path.join(root, "bench", "step0", f"rank{rank}", "dump.json"), bench, compact=True)
    return os.path.join(root, "npu"), os.path.join(root, "bench")


def _members(path):
    import zipfile

    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def test_a_job_through_templates_writes_the_reports_of_each_pair_alone(tmp_path, monkeypatch):
    made = []

    class Recorded(DumpTemplates):
        def __init__(self):
            super().__init__()
            made.append(self)

    monkeypatch.setattr("msprobe.core.compare.runner.DumpTemplates", Recorded)
    npu, bench = _job(str(tmp_path / "job"), 5, fault_rank=3, extra_rank=1)
    options = CompareOptions(progress=False, timestamp="1", processes=1, is_print_compare_log=False)
    outcomes = compare_dumps(npu, bench, str(tmp_path / "job_out"), options)
    assert len(made) == 1 and sum(t.hits for t in made[0].templates) >= 6  # 10 files, 2 structures, 1 odd rank
    assert len(outcomes) == 5
    for rank, outcome in enumerate(outcomes):
        os.makedirs(tmp_path / f"alone{rank}")
        alone = compare_pair(os.path.join(npu, "step0", f"rank{rank}", "dump.json"),
                             os.path.join(bench, "step0", f"rank{rank}", "dump.json"),
                             str(tmp_path / f"alone{rank}"), options)
        assert _members(outcome.xlsx_path) == _members(alone.xlsx_path)
        with open(outcome.advisor_path) as ours, open(alone.advisor_path) as theirs:
            assert ours.read() == theirs.read()
    assert outcomes[3].summary["suspect"] is not None and outcomes[0].summary["suspect"] is None


def _mutations(text, rng, count):
    """`text` with one small edit each: a byte of the skeleton or of a number changed, dropped or doubled."""
    alphabet = b'": -+.eE0123456789ax,{}[]'
    for _ in range(count):
        at = rng.randrange(len(text))
        edit = rng.choice(("change", "drop", "double"))
        if edit == "change":
            yield text[:at] + bytes([rng.choice(alphabet)]) + text[at + 1:]
        elif edit == "drop":
            yield text[:at] + text[at + 1:]
        else:
            yield text[:at] + text[at:at + 1] * 2 + text[at + 1:]


@pytest.mark.parametrize("compact", [False, True])
def test_byte_edits_read_through_a_template_equal_the_full_read(tmp_path, compact):
    """Files one byte away from a rank of the template's structure (in a statistic's digits, a key, a name, a
    brace): each is read through the template only when the rest of its text is the template's, and every table
    read equals the full read of the same bytes (or both refuse the file)."""
    from msprobe.core.errors import MsprobeError

    made = DumpTemplates(builds=1)  # the first file's template only: an edited file makes none
    load_dump(_write(str(tmp_path / "first" / "dump.json"), _jittered(_sample(), 1), compact), made)
    with open(_write(str(tmp_path / "other" / "dump.json"), _jittered(_sample(), 4), compact), "rb") as handle:
        other = handle.read()
    path = str(tmp_path / "edited" / "dump.json")
    os.makedirs(os.path.dirname(path))
    rng, read, refused = random.Random(5), 0, 0
    for text in _mutations(other, rng, 400):
        with open(path, "wb") as handle:
            handle.write(text)
        try:
            full = load_dump(path)
        except MsprobeError:
            refused += 1
            with pytest.raises(MsprobeError):
                load_dump(path, made)
            continue
        _assert_same_table(load_dump(path, made), full)
        read += 1
    [template] = made.templates
    hits = template.hits
    assert read > 50 and refused > 50  # most edits break the JSON; many keep it valid
    assert 3 < hits < read  # the edits of a statistic's digits match the template; the others do not


def test_operands_read_from_per_row_lists_equal_the_per_row_numpy_reads():
    """contraction._Operands.get / max_abs (lists made once a pair) against _operand / nan_max row by row, on
    scores and statistics holding NaN, infinities and unseen selections."""
    from types import SimpleNamespace

    from msprobe.core.compare import contraction
    from msprobe.core.compare.selection import nan_max

    rng = np.random.default_rng(5)
    rows = 400
    scores = rng.exponential(2.0, (rows, 5))
    scores[rng.random((rows, 5)) < 0.3] = np.nan
    scores[rng.random((rows, 5)) < 0.05] = np.inf
    stats = rng.standard_normal((rows, 4)) * 10.0 ** rng.integers(-3, 4, (rows, 4))
    stats[rng.random((rows, 4)) < 0.1] = np.nan
    stats[rng.random((rows, 4)) < 0.05] = -np.inf
    unseen = {int(r): float(v) for r, v in zip(rng.integers(0, rows, 60), rng.exponential(3.0, 60))}
    records = SimpleNamespace(names=[f"r{i}" for i in range(rows)], extra={})
    judgement = SimpleNamespace(scores=scores)
    for seen in (unseen, None):
        ops = contraction._Operands(records, judgement, stats, np.ones(rows), seen)
        for row in [None] + list(range(rows)):
            assert ops.get(row) == contraction._operand(judgement, stats, row, seen), row
            if row is not None:
                value = nan_max(np.abs(stats[row, :2]))
                assert ops.max_abs(row) == (value if value is not None and np.isfinite(value) else np.inf)
