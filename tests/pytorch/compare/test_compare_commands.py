"""`msprobe -f pytorch compare / merge_result` and the Python API on real dumps, including 2-rank gloo."""
import glob
import json
import os

import openpyxl

from msprobe.cli import main


def _write_compare_json(path, npu, bench, **extra):
    with open(path, "w") as handle:
        json.dump(dict(npu_path=npu, bench_path=bench, **extra), handle)
    return str(path)


def test_cli_single_rank_with_options(dumps, tmp_path):
    config = _write_compare_json(tmp_path / "c.json", os.path.join(dumps["tensor_broken"], "dump.json"),
                                 os.path.join(dumps["tensor_fp32"], "dump.json"))
    out = tmp_path / "out"
    assert main(["-f", "pytorch", "compare", "-i", config, "-o", str(out), "-d"]) == 0
    [report] = glob.glob(str(out / "compare_result_*.xlsx"))
    assert len(glob.glob(str(out / "advisor_*.txt"))) == 1
    sheet = openpyxl.load_workbook(report).worksheets[0]
    kept = [row for row in sheet.iter_rows(min_row=2)]
    # -d keeps only failing, highlighted or suspicious rows (Suspicion, the last column, says why)
    assert kept and all(row[19].value != "Yes" or row[0].fill.fill_type or row[-1].value for row in kept)
    assert sheet.cell(1, sheet.max_column).value == "Suspicion"
    assert "Module.act.GELU.forward.0.output.0" in [row[0].value for row in kept]
    out2 = tmp_path / "out2"
    assert main(["-f", "pytorch", "compare", "-i", config, "-o", str(out2), "-c", "-f"]) == 0
    assert glob.glob(str(out2 / "advisor_*.txt")) == []


def test_cli_data_mapping_and_errors(dumps, tmp_path):
    mapping = tmp_path / "map.yaml"
    mapping.write_text("Functional.gelu.0.forward.output.0: Functional.gelu.0.forward.input.0\n")
    config = _write_compare_json(tmp_path / "c.json", os.path.join(dumps["stat_fp32"], "dump.json"),
                                 os.path.join(dumps["stat_fp32_again"], "dump.json"))
    assert main(["-f", "pytorch", "compare", "-i", config, "-o", str(tmp_path / "o"), "-dm", str(mapping)]) == 0
    header, rows = _report_header(tmp_path / "o")
    by_name = {row[0]: row for row in rows}
    mapped = by_name["Functional.gelu.0.forward.output.0"]
    assert mapped[1] == "Functional.gelu.0.forward.input.0"
    assert mapped[header.index("Max diff")] != 0.0  # gelu's output against its input really differs
    # the mapping wins over the name match of gelu's input row, which is reported unmatched instead
    assert by_name["Functional.gelu.0.forward.input.0"][1] == "N/A"
    assert main(["-f", "pytorch", "compare", "-i", config, "-o", str(tmp_path / "o"), "-dm", str(mapping), "-f"]) == 1
    bad = _write_compare_json(tmp_path / "bad.json", "/no/such/dump.json", "/no/such/other.json")
    assert main(["-f", "pytorch", "compare", "-i", bad, "-o", str(tmp_path / "o")]) == 1
    mixed = _write_compare_json(tmp_path / "mixed.json", os.path.join(dumps["stat_fp32"], "dump.json"),
                                os.path.join(dumps["tensor_fp32"], "dump.json"))
    assert main(["-f", "pytorch", "compare", "-i", mixed, "-o", str(tmp_path / "o")]) == 1


def test_python_api(dumps, tmp_path):
    from msprobe.pytorch import compare

    stack = os.path.join(dumps["stat_broken"], "stack.json")
    param = {"npu_json_path": os.path.join(dumps["stat_broken"], "dump.json"),
             "bench_json_path": os.path.join(dumps["stat_fp32"], "dump.json"), "stack_json_path": stack,
             "is_print_compare_log": False}
    [with_stack] = compare(param, output_path=str(tmp_path / "a"), stack_mode=True)
    assert "NPU_Stack_Info" in with_stack.result.header
    [without] = compare(param, output_path=str(tmp_path / "b"), stack_mode=False, auto_analyze=False)
    assert "NPU_Stack_Info" not in without.result.header and without.advisor_path is None


def test_two_rank_gloo_compare_and_merge(dist_dumps, tmp_path, capfd):
    npu_step, bench_step = dist_dumps
    config = _write_compare_json(tmp_path / "c.json", npu_step, bench_step)
    out = tmp_path / "out"
    assert main(["-f", "pytorch", "compare", "-i", config, "-o", str(out), "-p", "2"]) == 0
    assert "compare ranks: 100%" in capfd.readouterr().err  # ranks run in two workers, with a progress bar
    reports = sorted(os.path.basename(p) for p in glob.glob(str(out / "compare_result_rank*.xlsx")))
    assert [r.split("_")[2] for r in reports] == ["rank0-rank0", "rank1-rank1"]
    merge_config = tmp_path / "merge.yaml"
    merge_config.write_text("api:\n- Distributed.all_reduce\ncompare_index:\n- Max diff\n- Norm diff\n")
    merged = tmp_path / "merged"
    assert main(["-f", "pytorch", "merge_result", "-i", str(out), "-o", str(merged), "-config", str(merge_config)]) == 0
    [path] = glob.glob(str(merged / "multi_ranks_compare_merge_*.xlsx"))
    book = openpyxl.load_workbook(path)
    assert book.sheetnames == ["Max diff", "L2norm diff"]
    rows = [[c.value for c in row] for row in book["Max diff"].iter_rows()]
    assert rows[0] == ["NPU Name", "rank0", "rank1"]
    assert len(rows) > 4 and all(r[0].startswith("Distributed.all_reduce.") for r in rows[1:])
    tensor_rows = [r for r in rows[1:] if r[0].endswith((".input.0", ".output.0"))]
    assert tensor_rows and all(isinstance(v, float) for r in tensor_rows for v in r[1:])
    assert any(r[1] != r[2] for r in tensor_rows)  # each rank has its own data


def test_merge_result_rejects_bad_config(tmp_path):
    config = tmp_path / "merge.yaml"
    config.write_text("compare_index:\n- Max diff\n")
    (tmp_path / "in").mkdir()
    assert main(["-f", "pytorch", "merge_result", "-i", str(tmp_path / "in"), "-o", str(tmp_path / "o"),
                 "-config", str(config)]) == 1


def test_dump_roots_are_compared_step_by_step(tmp_path):
    from compare_models import dump_mlp

    dump_mlp(str(tmp_path / "npu"), task="statistics", level="L1", steps=2, dtype="bf16")
    dump_mlp(str(tmp_path / "bench"), task="statistics", level="L1", steps=2)
    config = _write_compare_json(tmp_path / "c.json", str(tmp_path / "npu"), str(tmp_path / "bench"))
    out = tmp_path / "out"
    assert main(["-f", "pytorch", "compare", "-i", config, "-o", str(out), "-c"]) == 0
    reports = sorted(os.path.basename(p) for p in glob.glob(str(out / "compare_result_*.xlsx")))
    assert [r.split("_")[2] for r in reports] == ["step0", "step1"]


def test_cli_statistics_and_tensor_compare_never_import_torch(dumps, tmp_path):
    import subprocess
    import sys

    for mode in ("stat", "tensor"):
        config = _write_compare_json(tmp_path / f"{mode}.json", os.path.join(dumps[f"{mode}_broken"], "dump.json"),
                                     os.path.join(dumps[f"{mode}_fp32"], "dump.json"))
        code = ("import sys; from msprobe.cli import main; "
                f"code = main(['-f', 'pytorch', 'compare', '-i', {config!r}, '-o', {str(tmp_path / mode)!r}]); "
                "print(code, 'torch' in sys.modules)")
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert result.stdout.split()[-2:] == ["0", "False"], result.stdout + result.stderr
        assert glob.glob(str(tmp_path / mode / "compare_result_*.xlsx"))


def _report_header(directory):
    [report] = glob.glob(os.path.join(str(directory), "compare_result_*.xlsx"))
    sheet = openpyxl.load_workbook(report).worksheets[0]
    rows = [[cell.value for cell in row] for row in sheet.iter_rows()]
    return rows[0], rows[1:]


def test_cli_stack_path_obeys_s(dumps, tmp_path):
    rank = dumps["stat_broken"]
    config = _write_compare_json(tmp_path / "c.json", os.path.join(rank, "dump.json"),
                                 os.path.join(dumps["stat_fp32"], "dump.json"),
                                 stack_path=os.path.join(rank, "stack.json"))
    assert main(["-f", "pytorch", "compare", "-i", config, "-o", str(tmp_path / "with"), "-s", "-c"]) == 0
    header, rows = _report_header(tmp_path / "with")
    stacks = [row[header.index("NPU_Stack_Info")] for row in rows]
    assert "compare_models.py" in stacks[0]  # the first call's stack points into the model code
    assert main(["-f", "pytorch", "compare", "-i", config, "-o", str(tmp_path / "without"), "-c"]) == 0
    assert "NPU_Stack_Info" not in _report_header(tmp_path / "without")[0]


def test_cli_truncated_dump_is_an_error_naming_the_file(dumps, tmp_path, capfd):
    bad = tmp_path / "npu" / "dump.json"
    bad.parent.mkdir()
    with open(os.path.join(dumps["stat_fp32"], "dump.json")) as handle:
        bad.write_text(handle.read()[:-100])
    config = _write_compare_json(tmp_path / "c.json", str(bad), os.path.join(dumps["stat_fp32"], "dump.json"))
    assert main(["-f", "pytorch", "compare", "-i", config, "-o", str(tmp_path / "o")]) == 1
    captured = capfd.readouterr()
    text = captured.out + captured.err
    assert "[ERROR]" in text and str(bad) in text and "not valid JSON" in text and "Traceback" not in text


def test_cli_tensor_compare_shows_progress(dumps, tmp_path, capfd):
    config = _write_compare_json(tmp_path / "c.json", os.path.join(dumps["tensor_broken"], "dump.json"),
                                 os.path.join(dumps["tensor_fp32"], "dump.json"))
    assert main(["-f", "pytorch", "compare", "-i", config, "-o", str(tmp_path / "o"), "-c"]) == 0
    err = capfd.readouterr().err
    assert "compare tensors" in err and "100%" in err


def test_merge_result_leaves_missing_ranks_blank_and_refuses_md5(dumps, tmp_path):
    from msprobe.core.compare import CompareOptions
    from msprobe.core.compare.merge_result import STATISTICS_INDEX
    from msprobe.core.compare.pair import compare_pair

    options = CompareOptions(progress=False, auto_analyze=False, timestamp="1")
    results = tmp_path / "results"
    results.mkdir()
    rank0 = compare_pair(os.path.join(dumps["stat_broken"], "dump.json"), os.path.join(dumps["stat_fp32"], "dump.json"),
                         str(results), options, "_rank0-rank0").result
    compare_pair(os.path.join(dumps["stat_fp32_again"], "dump.json"), os.path.join(dumps["stat_fp32"], "dump.json"),
                 str(results), options, "_rank1-rank1")
    # only the broken rank calls Tensor.__mul__ (named Tensor.mul by older dumps)
    mul = next(n for n in rank0.columns["NPU Name"] if n.startswith("Tensor.") and "mul" in n
               and n.endswith(".0.forward.output.0"))
    config = tmp_path / "merge.yaml"
    config.write_text(f"api:\n- {mul[:-len('.0.forward.output.0')]}\n- Functional.gelu.0.forward\n")  # all metrics
    merged = tmp_path / "merged"
    assert main(["-f", "pytorch", "merge_result", "-i", str(results), "-o", str(merged), "-config", str(config)]) == 0
    [path] = glob.glob(str(merged / "multi_ranks_compare_merge_*.xlsx"))
    book = openpyxl.load_workbook(path)
    assert book.sheetnames == STATISTICS_INDEX
    rows = {row[0]: row[1:] for row in book["Max diff"].iter_rows(min_row=2, values_only=True)}
    expected = rank0.columns["Max diff"][rank0.columns["NPU Name"].index(mul)]
    assert rows[mul] == (expected, None)
    assert rows["Functional.gelu.0.forward.output.0"] == (0.0, 0.0)
    relative = {row[0]: row[1:] for row in book["MaxRelativeErr"].iter_rows(min_row=2, values_only=True)}
    assert relative["Functional.gelu.0.forward.output.0"] == ("0.0%", "0.0%")

    tensor_results = tmp_path / "tensor_results"
    tensor_results.mkdir()
    tensor_ranks = [compare_pair(os.path.join(dumps[npu], "dump.json"), os.path.join(dumps["tensor_fp32"], "dump.json"),
                                 str(tensor_results), options, f"_rank{rank}-rank{rank}").result
                    for rank, npu in enumerate(("tensor_broken", "tensor_seed2"))]
    config.write_text("api:\n- Module.act\ncompare_index:\n- Cosine\n- MaxAbsErr\n")
    assert main(["-f", "pytorch", "merge_result", "-i", str(tensor_results), "-o", str(tmp_path / "tensor_merged"),
                 "-config", str(config)]) == 0
    [path] = glob.glob(str(tmp_path / "tensor_merged" / "multi_ranks_compare_merge_*.xlsx"))
    book = openpyxl.load_workbook(path)
    assert book.sheetnames == ["Cosine", "MaxAbsErr"]
    cosine = {row[0]: row[1:] for row in book["Cosine"].iter_rows(min_row=2, values_only=True)}
    name = "Module.act.GELU.forward.0.output.0"
    assert cosine[name] == tuple(r.columns["Cosine"][r.columns["NPU Name"].index(name)] for r in tensor_ranks)
    assert all(key.startswith("Module.act.GELU.") for key in cosine)

    md5_results = tmp_path / "md5_results"
    md5_results.mkdir()
    compare_pair(os.path.join(dumps["md5_fp32"], "dump.json"), os.path.join(dumps["md5_seed2"], "dump.json"),
                 str(md5_results), options, "_rank0-rank0")
    assert main(["-f", "pytorch", "merge_result", "-i", str(md5_results), "-o", str(merged),
                 "-config", str(config)]) == 1


def test_compare_distributed_api_and_dump_roots(dist_dumps, tmp_path):
    """compare_distributed over the step directories runs both ranks in worker processes; giving the
    dump roots instead names each report after its step and rank."""
    from msprobe.pytorch.compare import compare_distributed

    npu_step, bench_step = dist_dumps
    outcomes = compare_distributed(npu_step, bench_step, str(tmp_path / "api"), processes=2, auto_analyze=False)
    assert [os.path.basename(o.xlsx_path).split("_")[2] for o in outcomes] == ["rank0-rank0", "rank1-rank1"]
    assert all(o.result is None for o in outcomes)  # computed in the workers; the reports are the output
    for outcome in outcomes:
        header, rows = _report_header_of(outcome.xlsx_path)
        names = [row[0] for row in rows]
        assert names == [row[1] for row in rows] and any(n.startswith("Distributed.all_reduce.") for n in names)
    config = _write_compare_json(tmp_path / "c.json", os.path.dirname(npu_step), os.path.dirname(bench_step))
    assert main(["-f", "pytorch", "compare", "-i", config, "-o", str(tmp_path / "roots"), "-c"]) == 0
    reports = sorted(os.path.basename(p) for p in glob.glob(str(tmp_path / "roots" / "compare_result_*.xlsx")))
    assert ["_".join(r.split("_")[2:4]) for r in reports] == ["step0_rank0-rank0", "step0_rank1-rank1"]


def _report_header_of(path):
    rows = [list(row) for row in openpyxl.load_workbook(path).worksheets[0].iter_rows(values_only=True)]
    return rows[0], rows[1:]


def test_cli_layer_mapping_pairs_renamed_modules(tmp_path):
    from compare_models import dump_mlp

    npu = dump_mlp(str(tmp_path / "npu"), task="statistics", level="L0")
    bench = dump_mlp(str(tmp_path / "bench"), task="statistics", level="L0", renamed=True)
    config = _write_compare_json(tmp_path / "c.json", os.path.join(npu, "dump.json"), os.path.join(bench, "dump.json"))
    assert main(["-f", "pytorch", "compare", "-i", config, "-o", str(tmp_path / "plain"), "-c"]) == 0
    header, rows = _report_header(tmp_path / "plain")
    assert {row[1] for row in rows if row[0].startswith("Module.l1.")} == {"N/A"}
    layers = tmp_path / "layers.yaml"
    layers.write_text("MLP:\n  l1: fc1\n")
    assert main(["-f", "pytorch", "compare", "-i", config, "-o", str(tmp_path / "mapped"), "-c",
                 "-lm", str(layers)]) == 0
    header, rows = _report_header(tmp_path / "mapped")
    assert "N/A" not in [row[0] for row in rows] + [row[1] for row in rows]  # every row paired, none left over
    l1 = [row for row in rows if row[0].startswith("Module.l1.")]
    assert len(l1) >= 6 and all(row[1] == "Module.fc1." + row[0][len("Module.l1."):] for row in l1)
    diffs = [row[header.index("Max diff")] for row in l1 if row[header.index("NPU Dtype")] == "torch.float32"]
    assert len(diffs) >= 6 and set(diffs) == {0.0}  # same seed, same weights and data


def test_python_api_fuzzy_match(tmp_path):
    from compare_models import dump_mlp
    from msprobe.pytorch import compare

    npu = dump_mlp(str(tmp_path / "npu"), task="statistics", level="L1", extra_call=True)
    bench = dump_mlp(str(tmp_path / "bench"), task="statistics", level="L1")
    for side in (npu, bench):  # no call sites: exact pairing goes by name alone
        os.remove(os.path.join(side, "stack.json"))
    param = {"npu_json_path": os.path.join(npu, "dump.json"), "bench_json_path": os.path.join(bench, "dump.json")}
    for fuzzy, expected in ((False, "N/A"), (True, "Functional.gelu.0.forward.output.0")):
        [outcome] = compare(param, str(tmp_path / f"out_{fuzzy}"), False, True, fuzzy)  # positional, as documented
        names = outcome.result.columns["NPU Name"]
        assert outcome.result.columns["Bench Name"][names.index("Functional.gelu.1.forward.output.0")] == expected
        assert os.path.basename(outcome.advisor_path).startswith("advisor_")
