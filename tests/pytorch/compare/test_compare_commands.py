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
    # -d keeps only failing or highlighted rows
    assert kept and all(row[19].value != "Yes" or row[0].fill.fill_type for row in kept)
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


def test_two_rank_gloo_compare_and_merge(dist_dumps, tmp_path):
    npu_step, bench_step = dist_dumps
    config = _write_compare_json(tmp_path / "c.json", npu_step, bench_step)
    out = tmp_path / "out"
    assert main(["-f", "pytorch", "compare", "-i", config, "-o", str(out)]) == 0
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
