"""26.x's command lines on real dumps: `msprobe compare -tp DIR -gp DIR` (framework from dump.json), folders
laid out as 26.x writes them (step0/proc<PID>/dump.json), several ranks paired, 26.x subcommand names."""
import glob
import json
import os
import shutil

import openpyxl
import pytest

from msprobe.cli import main
from msprobe.core import cli_forms
from msprobe.core.dump_paths import dump_framework, dump_json_of, dump_jsons


def _rows(out_dir, pattern="compare_result_*.xlsx"):
    [report] = glob.glob(os.path.join(str(out_dir), pattern))
    return [[cell.value for cell in row] for row in openpyxl.load_workbook(report).worksheets[0].iter_rows()]


def _as_26x(rank_dir, root, proc):
    """A copy of a rank folder where 26.x puts a process without a distributed rank: root/step0/proc<PID>."""
    target = os.path.join(str(root), "step0", f"proc{proc}")
    shutil.copytree(rank_dir, target)
    return target


def _compare_json(tmp_path, npu, bench):
    path = tmp_path / "compare.json"
    path.write_text(json.dumps({"npu_path": npu, "bench_path": bench, "is_print_compare_log": False}))
    return str(path)


def test_tp_gp_folders_compare_as_compare_json_does(dumps, tmp_path, capsys):
    npu = _as_26x(dumps["stat_broken"], tmp_path / "npu", 4242)
    bench = _as_26x(dumps["stat_fp32"], tmp_path / "bench", 17)
    reference = tmp_path / "reference"
    config = _compare_json(tmp_path, os.path.join(dumps["stat_broken"], "dump.json"),
                           os.path.join(dumps["stat_fp32"], "dump.json"))
    assert main(["-f", "pytorch", "compare", "-i", config, "-o", str(reference)]) == 0
    expected = _rows(reference)
    assert len(expected) > 10
    # the dump root, the step folder and the proc folder: each means the one dump.json under it; no -f given
    for i, (target, golden) in enumerate([(tmp_path / "npu", tmp_path / "bench"),
                                          (os.path.dirname(npu), os.path.dirname(bench)), (npu, bench)]):
        out = tmp_path / f"out{i}"
        assert main(["compare", "-tp", str(target), "-gp", str(golden), "-o", str(out)]) == 0
        assert _rows(out) == expected
    # 1.2.1's options keep working in 26.x's form (-d: only the rows that differ)
    assert main(["compare", "-tp", npu, "-gp", bench, "-o", str(tmp_path / "diff"), "-d", "-fm"]) == 0
    assert 1 < len(_rows(tmp_path / "diff")) < len(expected)
    capsys.readouterr()


def test_several_ranks_are_paired_as_a_job_compare(dist_dumps, tmp_path):
    npu_step, bench_step = dist_dumps
    out = tmp_path / "ranks"
    assert main(["compare", "-tp", npu_step, "-gp", bench_step, "-o", str(out)]) == 0
    assert sorted(os.path.basename(p).split("_")[2] for p in glob.glob(str(out / "compare_result_*.xlsx"))) == [
        "rank0-rank0", "rank1-rank1"]
    # the same job as 26.x lays out processes: PIDs differ between runs, so they pair in PID order
    for side, step, pids in (("npu", npu_step, (300, 1200)), ("bench", bench_step, (77, 90))):
        for rank, pid in zip((0, 1), pids):
            _as_26x(os.path.join(step, f"rank{rank}"), tmp_path / side, pid)
    procs = tmp_path / "procs"
    assert main(["compare", "-tp", str(tmp_path / "npu"), "-gp", str(tmp_path / "bench"), "-o", str(procs)]) == 0
    reports = {os.path.basename(p).split("_")[3]: p for p in glob.glob(str(procs / "compare_result_*.xlsx"))}
    assert sorted(reports) == ["proc1200-proc90", "proc300-proc77"]
    for rank, tag in ((0, "proc300-proc77"), (1, "proc1200-proc90")):
        [by_rank] = glob.glob(str(out / f"compare_result_rank{rank}-rank{rank}_*.xlsx"))
        rows = [[c.value for c in row] for row in openpyxl.load_workbook(reports[tag]).worksheets[0].iter_rows()]
        assert rows == [[c.value for c in row] for row in openpyxl.load_workbook(by_rank).worksheets[0].iter_rows()]


def test_the_framework_is_read_from_the_dump_or_asked_for(dumps, tmp_path, capsys):
    rank_dir = dumps["stat_fp32"]
    assert dump_framework(rank_dir) == "pytorch" and dump_framework(os.path.dirname(rank_dir)) == "pytorch"
    ms_dir = tmp_path / "ms" / "step0" / "rank0"
    ms_dir.mkdir(parents=True)
    (ms_dir / "dump.json").write_text('{"task": "statistics", "level": "L1", "framework": "mindspore", "data": {}}')
    assert cli_forms.framework_of_args("compare", ["-tp", str(tmp_path / "ms"), "-gp", "x"], True) == "mindspore"
    # a dump that does not say: 26.x's form asks for -f in one line; 1.2.1's form keeps PyTorch
    bare = tmp_path / "bare" / "step0" / "rank"
    shutil.copytree(rank_dir, bare)
    with open(bare / "dump.json", encoding="utf-8") as handle:
        content = json.load(handle)
    del content["framework"]
    (bare / "dump.json").write_text(json.dumps(content))
    assert dump_framework(str(bare)) is None
    assert main(["compare", "-tp", str(bare), "-gp", rank_dir, "-o", str(tmp_path / "o")]) == 1
    out = capsys.readouterr().out.strip()
    assert len(out.splitlines()) == 1 and "msprobe -f pytorch compare" in out and "[ERROR]" in out
    assert main(["-f", "pytorch", "compare", "-tp", str(bare), "-gp", rank_dir, "-o", str(tmp_path / "o")]) == 0
    assert cli_forms.framework_of_args("run_ut", ["-api_info", str(bare)], False) is None


def test_input_errors_are_one_line(dumps, tmp_path, capsys):
    config = _compare_json(tmp_path, os.path.join(dumps["stat_fp32"], "dump.json"),
                           os.path.join(dumps["stat_fp32"], "dump.json"))
    for argv in (["compare", "-tp", dumps["stat_fp32"], "-o", str(tmp_path)],
                 ["compare", "-i", config, "-tp", dumps["stat_fp32"], "-gp", dumps["stat_fp32"]],
                 ["-f", "pytorch", "compare", "-o", str(tmp_path)],
                 ["compare", "-tp", str(tmp_path / "none"), "-gp", dumps["stat_fp32"]],
                 ["offline_dump", "-h"], ["install_deps"]):
        assert main(argv) == 1, argv
        out = capsys.readouterr().out.strip()
        assert out.startswith("[ERROR]") and len(out.splitlines()) == 1, (argv, out)


def test_a_folder_with_several_dumps_is_refused_where_one_is_taken(dist_dumps):
    npu_step, _ = dist_dumps
    assert [os.path.basename(os.path.dirname(p)) for p in dump_jsons(npu_step)] == ["rank0", "rank1"]
    assert dump_json_of(os.path.join(npu_step, "rank1")) == os.path.join(npu_step, "rank1", "dump.json")
    with pytest.raises(Exception, match="holds 2 dumps"):
        dump_json_of(npu_step)


def test_26x_names_and_options_translate():
    assert cli_forms.resolve_command("acc_check", ["-api_info", "d"]) == ("run_ut", ["-api_info", "d"], True)
    assert cli_forms.resolve_command("data2db", ["--data=x", "--db", "y"]) == ("trend", ["-i=x", "-o", "y"], True)
    assert cli_forms.resolve_command("compare", ["-i", "c.json"]) == ("compare", ["-i", "c.json"], False)
    assert cli_forms.resolve_command("compare", ["-tp", "a", "-gp", "b"])[2] is True
    assert set(cli_forms.ALIASES.values()) <= set(main.__globals__["SUBCOMMANDS"])


def test_acc_check_and_graph_visualize_take_dump_folders(dumps, tmp_path):
    npu = _as_26x(dumps["tensor_broken"], tmp_path / "npu", 99)
    bench = _as_26x(dumps["tensor_fp32"], tmp_path / "bench", 98)
    checked = tmp_path / "acc"
    assert main(["acc_check", "-api_info", str(tmp_path / "npu"), "-o", str(checked)]) == 0
    [result] = glob.glob(str(checked / "accuracy_checking_result_*.csv"))
    with open(result, encoding="utf-8") as handle:
        names = [line.split(",")[0] for line in handle.read().splitlines()[1:]]
    with open(os.path.join(npu, "dump.json"), encoding="utf-8") as handle:
        data = json.load(handle)["data"]
    assert len(names) > 5 and all(f"{name}.forward" in data for name in names)
    graph = tmp_path / "graph"
    assert main(["graph_visualize", "-tp", str(tmp_path / "npu"), "-gp", str(tmp_path / "bench"), "-o", str(graph)]) == 0
    assert len(glob.glob(str(graph / "compare_*.vis"))) == 1
    assert os.path.isdir(bench)


def test_parse_converts_dumped_tensor_files(dumps, tmp_path, capsys):
    import numpy as np
    import torch

    source = os.path.join(dumps["tensor_fp32"], "dump_tensor_data")
    names = sorted(os.listdir(source))
    assert main(["parse", "-d", source, "-t", "npy", "-o", str(tmp_path / "npy")]) == 0
    assert sorted(os.listdir(tmp_path / "npy")) == sorted(name[:-3] + ".npy" for name in names)
    for name in names:
        original = torch.load(os.path.join(source, name))
        assert np.array_equal(np.load(tmp_path / "npy" / (name[:-3] + ".npy")), original.float().numpy())
    # and back, one file, into the default -t pt
    one = str(tmp_path / "npy" / (names[0][:-3] + ".npy"))
    assert main(["parse", "-d", one, "-o", str(tmp_path / "pt")]) == 0
    assert torch.equal(torch.load(tmp_path / "pt" / names[0]), torch.load(os.path.join(source, names[0])).float())
    assert main(["-f", "mindspore", "parse", "-d", one, "-o", str(tmp_path / "x")]) == 1  # -t pt needs torch
    assert "parse -t pt needs PyTorch" in capsys.readouterr().out
