"""Outputs and names from data: trend's DuckDB store is never written through a symlink and is 0640 while it
is written; its plot never parses module names as mathtext; step/rank folder names are ASCII-checked where they
become paths or pairs, and numbers past 2^31 - 1 are skipped with a warning."""
import os
import stat

import numpy as np
import pytest

from msprobe.cli import main


def _job(root, ranks):
    """step0/<rank folder>/dump.json for each name in `ranks` (an empty dump: only the names matter here)."""
    for name in ranks:
        folder = root / "step0" / name
        folder.mkdir(parents=True)
        (folder / "dump.json").write_text('{"task": "statistics", "level": "L1", "data": {}}')
    return root


def test_trend_refuses_a_dangling_symlink_at_its_database(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    target = tmp_path / "elsewhere" / "stolen.duckdb"
    target.parent.mkdir()
    os.symlink(target, out / "trend.duckdb")
    job = _job(tmp_path / "dump", ["rank0"])
    assert main(["-f", "pytorch", "trend", "-i", str(job), "-o", str(out)]) == 1
    printed = capsys.readouterr()
    lines = [line for line in (printed.out + printed.err).splitlines() if "[ERROR]" in line]
    assert len(lines) == 1 and "symbolic link" in lines[0] and "trend.duckdb" in lines[0], lines
    assert not target.exists() and os.listdir(target.parent) == []


@pytest.mark.parametrize("side", [".wal", ".tmp"])
def test_trend_refuses_a_symlink_at_its_side_files(tmp_path, side):
    from msprobe.core.errors import PathError
    from msprobe.core.trend.store import TrendStore

    os.symlink(tmp_path / "target", tmp_path / f"trend.duckdb{side}")
    with pytest.raises(PathError, match="symbolic link"):
        TrendStore(str(tmp_path / "trend.duckdb"))
    assert not (tmp_path / "target").exists()


def test_trend_store_and_its_wal_are_0640_while_written_under_umask_022(tmp_path):
    from msprobe.core.trend.store import TrendStore

    old = os.umask(0o022)
    try:
        store = TrendStore(str(tmp_path / "trend.duckdb"))
        store.con.execute("INSERT INTO ingested VALUES ('s', 0, 0, 'p', 1, 0.0)")
        files = {name: stat.S_IMODE(os.stat(tmp_path / name).st_mode) for name in os.listdir(tmp_path)}
        store.close()
        assert os.umask(0o022) == 0o022  # the umask is given back at close
    finally:
        os.umask(old)
    assert "trend.duckdb" in files and "trend.duckdb.wal" in files, files
    assert all(mode & 0o027 == 0 for mode in files.values()), {k: oct(v) for k, v in files.items()}


def test_trend_plot_takes_module_names_literally():
    from msprobe.core.trend.heatmap import _png

    png = _png(np.ones((2, 2)), ["Module.$\\foo$.forward", "Module.a$b.forward"], [(0, 0), (1, 0)], "norm")
    assert png[:8] == b"\x89PNG\r\n\x1a\n"


def test_trend_skips_steps_and_ranks_past_int32(tmp_path, capsys):
    job = _job(tmp_path / "dump", ["rank0", "rank4294967296"])
    out = tmp_path / "out"
    assert main(["-f", "pytorch", "trend", "-i", str(job), "-o", str(out)]) == 0
    printed = capsys.readouterr()
    warned = [line for line in (printed.out + printed.err).splitlines() if "[WARNING]" in line]
    assert any("rank4294967296" in line and "skipped" in line for line in warned), warned
    import duckdb

    con = duckdb.connect(str(out / "trend.duckdb"), read_only=True)
    assert con.execute("SELECT step, rank FROM ingested").fetchall() == [(0, 0)]
    con.close()


def test_rank_folder_names_are_ascii_checked_for_pairing(tmp_path, caplog):
    from msprobe.core.compare.rank_pairs import find_rank_pairs

    npu = _job(tmp_path / "npu", ["rank0", "rank1", "rank\u0660", "rank1\n"])
    bench = _job(tmp_path / "bench", ["rank0", "rank1"])
    with caplog.at_level("WARNING", logger="msprobe"):
        pairs = find_rank_pairs(str(npu), str(bench))
    assert [(os.path.relpath(a, npu), os.path.relpath(b, bench)) for _, a, b in pairs] == [
        ("step0/rank0/dump.json", "step0/rank0/dump.json"), ("step0/rank1/dump.json", "step0/rank1/dump.json")]
    text = caplog.text
    assert "'rank\\u0660' is skipped" in text and "'rank1\\n' is skipped" in text, text


def test_job_folders_do_not_take_unicode_digits_for_ranks(tmp_path, caplog):
    from msprobe.core.job_tree import job_folders

    job = _job(tmp_path / "dump", ["rank0", "rank\u0660", "rank\u0661"])
    with caplog.at_level("WARNING", logger="msprobe"):
        found = job_folders(str(job))
    assert [(where.step, where.rank, os.path.basename(where.folder)) for where in found] == [(0, 0, "rank0")]
    assert "'rank\\u0661' is skipped" in caplog.text


def test_first_divergence_with_a_dict_for_an_md5_is_one_line(tmp_path):
    import json

    from msprobe.core.compare.first_divergence import find_first_divergence
    from msprobe.core.errors import CompareError

    def dump(side, output_md5):
        folder = tmp_path / side / "step0" / "rank0"
        folder.mkdir(parents=True)
        tensor = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2]}
        (folder / "dump.json").write_text(json.dumps({"task": "statistics", "level": "L1", "data": {
            "Functional.relu.0.forward": {"input_args": [{**tensor, "md5": "aa"}],
                                          "output": [{**tensor, "md5": output_md5}]}}}))
    dump("npu", {"md5": "bb"})
    dump("bench", "cc")
    with pytest.raises(CompareError, match=r"dump.json': entry 'Functional.relu.0.forward' has a dict where its "
                                           r"output.0 fingerprint should be a string"):
        find_first_divergence(str(tmp_path / "npu"), str(tmp_path / "bench"), str(tmp_path / "out"))


@pytest.mark.parametrize("command", ["graph", "compare"])
def test_an_entry_named_with_a_lone_surrogate_is_skipped_and_the_rest_reported(tmp_path, command, capsys):
    import json

    tensor = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": 1.0, "Min": 0.0, "Mean": 0.5,
              "Norm": 1.0, "requires_grad": False}
    for side in ("npu", "bench"):
        folder = tmp_path / side / "step0" / "rank0"
        folder.mkdir(parents=True)
        body = {"input_args": [tensor], "input_kwargs": {}, "output": [tensor]}
        (folder / "dump.json").write_text(json.dumps({"task": "statistics", "level": "L1", "framework": "pytorch",
                                                      "dump_data_dir": None, "data": {
                                                          "Functional.relu.0.forward": body,
                                                          "Functional.X\ud800.0.forward": body}}))
        (folder / "stack.json").write_text("{}")
        (folder / "construct.json").write_text("{}")
    pair = tmp_path / "pair.json"
    pair.write_text(json.dumps({"npu_path": str(tmp_path / "npu" / "step0" / "rank0"),
                                "bench_path": str(tmp_path / "bench" / "step0" / "rank0")}))
    assert main(["-f", "pytorch", command, "-i", str(pair), "-o", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr()
    text = printed.out + printed.err
    assert "[ERROR]" not in text and "Traceback" not in text, text[-2000:]
    assert "'Functional.X\\ud800.0.forward' is skipped" in text, text[-2000:]
    assert os.listdir(tmp_path / "out")
