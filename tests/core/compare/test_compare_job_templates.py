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


def test_the_c_split_equals_the_regex_split(tmp_path):
    """_pair_kernels.split_value_numbers against templates' regex (the reference): real dumps written both
    ways, and random texts of the bytes that matter."""
    from msprobe.core._pair_kernels import split_value_numbers

    from msprobe.core.compare import templates

    texts = []
    for compact in (False, True):
        with open(_write(str(tmp_path / f"d{compact}" / "dump.json"), _jittered(_sample(), 3), compact), "rb") as f:
            texts.append(f.read())
    rng = random.Random(11)
    alphabet = b'": -+.eE0123456789ax,{}[]'
    texts += [bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(20000)]
    for text in texts:
        for separator in (b'": ', b'":'):
            assert split_value_numbers(text, separator) == templates._VALUE_NUMBER[separator].split(text)


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
def test_the_c_template_match_equals_the_split_and_compare(tmp_path, compact):
    """_pair_kernels.fill_numbers (a file's statistics where its text is the template's but for them) against
    templates' split-and-compare (the reference): other ranks' files, and edits anywhere in them."""
    from msprobe.core._pair_kernels import fill_numbers

    from msprobe.core.compare import templates

    def text_of(seed):
        with open(_write(str(tmp_path / f"{compact}{seed}" / "dump.json"), _jittered(_sample(), seed), compact),
                  "rb") as handle:
            return handle.read()

    made = DumpTemplates()
    first = text_of(1)
    load_dump(str(tmp_path / f"{compact}1" / "dump.json"), made)
    [template] = made.templates
    rng = random.Random(5)
    texts = [first, text_of(2), text_of(3)] + list(_mutations(text_of(4), rng, 3000))
    matched = 0
    for text in texts:
        parts = templates._VALUE_NUMBER[template.separator].split(text)
        reference = templates._stat_text(template, template.separator, parts[0::2], parts[1::2])
        assert fill_numbers(text, template.segments) == reference
        matched += reference is not None
    assert matched > 3  # the other ranks and the edits of a statistic's digits match; most edits do not
    assert matched < len(texts) - 1000


def test_templates_read_the_same_tables_with_msprobe_native_stats_0(tmp_path):
    import subprocess
    import sys

    paths = [_write(str(tmp_path / f"rank{r}" / "dump.json"), _jittered(_sample(), r)) for r in range(3)]
    code = ("import sys, json; from msprobe.core.compare import templates; from msprobe.core.io.load import "
            "load_dump; t = templates.DumpTemplates(); tables = [load_dump(p, t) for p in sys.argv[1:]]; "
            "print(json.dumps([templates._NATIVE_SPLIT is None and templates._NATIVE_FILL is None, "
            "sum(x.hits for x in t.templates), "
            "[[repr(v) for v in table.columns['norm']] for table in tables]]))")
    runs = [json.loads(subprocess.run([sys.executable, "-c", code, *paths], capture_output=True, text=True, check=True,
                                      env={**os.environ, "MSPROBE_NATIVE_STATS": flag}).stdout) for flag in "01"]
    assert runs[0][0] is True and runs[1][0] is False
    assert runs[0][1] == runs[1][1] == 2 and runs[0][2] == runs[1][2]
    assert runs[0][2] == [[repr(v) for v in load_dump(p).columns["norm"]] for p in paths]


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
