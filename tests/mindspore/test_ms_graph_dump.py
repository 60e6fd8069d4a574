"""L2 kernel dump of static graphs (GRAPH_MODE and @jit) through MindSpore's native dump, and the
kernel compare of two such dumps. Each run is a subprocess: graph mode and the native dump
configuration are process-wide."""
import csv
import glob
import json
import os
import subprocess
import sys
import zlib

import numpy as np
import pytest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ms_graph_script.py")


def _run_graph(tmp_path, name, config, seed=0, steps=1, jit=False, variant="graph", env=None):
    directory = tmp_path / name
    directory.mkdir()
    config = dict(config, dump_path=str(directory / "dump"), level="L2")
    (directory / "config.json").write_text(json.dumps(config))
    cmd = [sys.executable, SCRIPT, str(directory / "config.json"), str(seed), str(steps), "jit" if jit else variant]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})})
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return str(directory / "dump"), result


def _weights_and_input(result):
    x = np.random.RandomState(0).randn(2, 4).astype(np.float32)
    return x, np.array(result["weight"], np.float32)


def test_graph_mode_statistics_are_computed_on_cpu(tmp_path):
    dump, result = _run_graph(tmp_path, "stats", {"task": "statistics"}, steps=2)
    iteration = os.path.join(dump, "rank_0", "Net", "0", "0")
    assert not glob.glob(os.path.join(iteration, "*.npy"))  # statistics mode keeps no tensors
    with open(os.path.join(iteration, "statistic.csv")) as handle:
        rows = list(csv.DictReader(handle))
    relu_out = [r for r in rows if r["Op Type"] == "ReLU" and r["IO"] == "output"][0]
    expected = np.array(result["output"], np.float32) / 2  # the net returns relu(...) * 2
    assert float(relu_out["Max Value"]) == pytest.approx(expected.max(), rel=1e-5)
    assert float(relu_out["L2Norm Value"]) == pytest.approx(np.linalg.norm(expected), rel=1e-5)
    assert relu_out["Shape"] == "(2,3)" and relu_out["Data Type"] == "Float32"
    x, weight = _weights_and_input(result)
    matmul_in = [r for r in rows if r["Op Type"] == "MatMul" and r["IO"] == "input" and r["Slot"] == "1"][0]
    assert float(matmul_in["Max Value"]) == pytest.approx(weight.max(), rel=1e-6)
    assert os.path.isfile(os.path.join(dump, "rank_0", "Net", "0", "1", "statistic.csv"))  # second step


def test_graph_mode_tensor_list_regex_and_output_only(tmp_path):
    dump, result = _run_graph(tmp_path, "tensor", {"task": "tensor", "tensor": {
        "list": ["name-regex(.*ReLU.*)"], "data_mode": ["output"]}})
    files = glob.glob(os.path.join(dump, "rank_0", "Net", "0", "0", "*.npy"))
    assert [os.path.basename(f).split(".")[0] for f in files] == ["ReLU"]
    assert ".output.0." in files[0]
    np.testing.assert_allclose(np.load(files[0]), np.array(result["output"]) / 2, rtol=1e-6)


def test_jit_function_in_pynative_is_dumped_at_l2(tmp_path):
    dump, _ = _run_graph(tmp_path, "jit", {"task": "tensor"}, steps=2, jit=True)
    assert glob.glob(os.path.join(dump, "rank_0", "*", "*", "1", "ReLU.*.output.0.*.npy"))


def test_kernel_compare_one_report_per_rank_and_step(tmp_path):
    import pandas as pd
    from msprobe.cli import main
    same_a, _ = _run_graph(tmp_path, "a", {"task": "tensor"}, seed=1, steps=2)
    same_b, _ = _run_graph(tmp_path, "b", {"task": "tensor"}, seed=1, steps=2)
    other, _ = _run_graph(tmp_path, "c", {"task": "tensor"}, seed=2, steps=2)
    for bench, out in ((same_b, "same"), (other, "other")):
        compare_json = tmp_path / f"{out}.json"
        compare_json.write_text(json.dumps({"npu_path": same_a, "bench_path": bench, "rank_id": [], "step_id": [1]}))
        assert main(["-f", "mindspore", "compare", "-i", str(compare_json), "-o", str(tmp_path / out)]) == 0
    reports = os.listdir(tmp_path / "same")
    assert len([r for r in reports if r.startswith("compare_result_0_1_")]) == 1
    assert not [r for r in reports if r.startswith("compare_result_0_0_")]  # step_id filter
    same = pd.read_excel(glob.glob(str(tmp_path / "same" / "compare_result_0_1_*.xlsx"))[0])
    judged = same[same["Accuracy Reached or Not"].notna()]  # scalars and bools get no verdict
    assert len(judged) >= 8 and (judged["Accuracy Reached or Not"] == "Yes").all()
    assert "ReLU.Default_ReLU-op0.forward.output.0" in set(same["NPU Name"])
    other = pd.read_excel(glob.glob(str(tmp_path / "other" / "compare_result_0_1_*.xlsx"))[0])
    weight_row = other[other["NPU Name"] == "MatMul.Default_fc-Dense_MatMul-op0.forward.input.1"].iloc[0]
    assert weight_row["Accuracy Reached or Not"] == "No"  # different initial weights are found


def test_kernel_compare_of_statistics_dumps(tmp_path):
    import pandas as pd
    from msprobe.cli import main
    a, _ = _run_graph(tmp_path, "a", {"task": "statistics"}, seed=1)
    b, _ = _run_graph(tmp_path, "b", {"task": "statistics"}, seed=1)
    compare_json = tmp_path / "c.json"
    compare_json.write_text(json.dumps({"npu_path": a, "bench_path": b}))
    assert main(["-f", "mindspore", "compare", "-i", str(compare_json), "-o", str(tmp_path / "out")]) == 0
    report = pd.read_excel(glob.glob(str(tmp_path / "out" / "compare_result_0_0_*.xlsx"))[0])
    assert "Max diff" in report.columns and len(report) >= 10
    assert (report["Max diff"].astype(float) == 0).all()


def _statistic_rows(dump, step=0):
    with open(os.path.join(dump, "rank_0", "Net", "0", str(step), "statistic.csv")) as handle:
        return list(csv.DictReader(handle))


def _bf16_bits(values):
    """bfloat16 bit patterns of float32 numbers that bfloat16 holds exactly."""
    return (np.asarray(values, np.float32).view(np.uint32) >> 16).astype(np.uint16)


def test_long_kernel_names_and_bfloat16_get_statistics_and_md5(tmp_path):
    """MindSpore renames files whose names pass 255 characters (mapping.csv) and writes bfloat16 with a
    dtype numpy cannot read: both still get their statistic.csv rows, under the real kernel name."""
    dump, result = _run_graph(tmp_path, "long", {"task": "statistics", "statistics": {"summary_mode": "md5"}},
                              variant="long")
    iteration = os.path.join(dump, "rank_0", "Net", "0", "0")
    assert sorted(os.listdir(iteration)) == ["statistic.csv"]  # no .npy, no mapping.csv left
    rows = _statistic_rows(dump)
    matmul = [r for r in rows if r["Op Type"] == "MatMul" and r["IO"] == "input" and r["Slot"] == "1"]
    assert len(matmul) == 1 and len(matmul[0]["Op Name"]) > 200  # the real name, from mapping.csv
    _, weight = _weights_and_input(result)
    assert float(matmul[0]["L2Norm Value"]) == pytest.approx(np.linalg.norm(weight), rel=1e-6)
    assert matmul[0]["MD5"] == f"{zlib.crc32(weight.tobytes()):08x}"
    cast = [r for r in rows if r["Op Type"] == "Cast" and r["IO"] == "output"][0]
    output = np.array(result["output"], np.float32)  # bfloat16 values, exact in float32
    assert cast["Data Type"] == "BFloat16" and cast["Data Size"] == str(output.size * 2)
    assert float(cast["Max Value"]) == output.max() and float(cast["Min Value"]) == output.min()
    assert float(cast["L2Norm Value"]) == pytest.approx(np.linalg.norm(output), rel=1e-6)
    assert cast["MD5"] == f"{zlib.crc32(_bf16_bits(output).tobytes()):08x}"


def test_kernel_compare_reads_long_names_and_bfloat16_tensors(tmp_path):
    import pandas as pd
    from msprobe.cli import main
    a, _ = _run_graph(tmp_path, "a", {"task": "tensor"}, seed=1, variant="long")
    b, _ = _run_graph(tmp_path, "b", {"task": "tensor"}, seed=1, variant="long")
    compare_json = tmp_path / "c.json"
    compare_json.write_text(json.dumps({"npu_path": a, "bench_path": b}))
    assert main(["-f", "mindspore", "compare", "-i", str(compare_json), "-o", str(tmp_path / "out")]) == 0
    report = pd.read_excel(glob.glob(str(tmp_path / "out" / "compare_result_0_0_*.xlsx"))[0])
    long_rows = report[report["NPU Name"].str.startswith("MatMul.") & (report["NPU Name"].str.len() > 200)
                       & (report["NPU Dtype"] == "Float32")]  # the Bool flag inputs get no cosine
    assert len(long_rows) == 3 and (long_rows["Cosine"].astype(float) > 0.9999).all()
    cast = report[report["NPU Name"] == "Cast.Default_Cast-op0.forward.output.0"].iloc[0]
    assert cast["NPU Dtype"] == "BFloat16" and float(cast["Cosine"]) == pytest.approx(1.0)
    assert cast["Accuracy Reached or Not"] == "Yes"


def test_kernel_compare_md5_and_summary_mode_items(tmp_path):
    import pandas as pd
    from msprobe.cli import main
    reports = {}
    for mode, summary in (("md5", "md5"), ("items", ["max", "l2norm"])):
        runs = [_run_graph(tmp_path, f"{mode}{seed}", {"task": "statistics", "statistics": {"summary_mode": summary}},
                           seed=seed)[0] for seed in (1, 2)]
        compare_json = tmp_path / f"{mode}.json"
        compare_json.write_text(json.dumps({"npu_path": runs[0], "bench_path": runs[1]}))
        assert main(["-f", "mindspore", "compare", "-i", str(compare_json), "-o", str(tmp_path / mode)]) == 0
        path = glob.glob(str(tmp_path / mode / "compare_result_0_0_*.xlsx"))[0]
        reports[mode] = pd.read_excel(path).set_index("NPU Name")
        if mode == "items":
            header = _statistic_rows(runs[0])[0].keys()
            assert "Max Value" in header and "L2Norm Value" in header and "Min Value" not in header
    md5, items = reports["md5"], reports["items"]
    matmul = "MatMul.Default_fc-Dense_MatMul-op0.forward"
    weight_row, input_row = f"{matmul}.input.1", f"{matmul}.input.0"
    assert md5.loc[weight_row, "Result"] == "Different" and md5.loc[input_row, "Result"] == "pass"
    assert float(items.loc[input_row, "Max diff"]) == 0 and float(items.loc[weight_row, "L2norm diff"]) != 0


def test_rank_filter_keeps_other_ranks_from_dumping(tmp_path):
    dump, _ = _run_graph(tmp_path, "rank1", {"task": "statistics", "rank": [0]}, env={"RANK_ID": "1"})
    assert not os.path.exists(os.path.join(dump, "rank_1")) and not os.path.exists(os.path.join(dump, "rank_0"))


def _l2_debugger(tmp_path, task, section):
    from msprobe.mindspore import PrecisionDebugger
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"task": task, "level": "L2", "dump_path": str(tmp_path / "dump"), task: section}))
    return PrecisionDebugger(config_path=str(config))


@pytest.mark.parametrize("file_format", ["npy", "bin"])
def test_file_format_reaches_the_native_config_and_bin_warns_on_cpu(ms, tmp_path, capsys, file_format):
    debugger = _l2_debugger(tmp_path, "tensor", {"file_format": file_format})
    settings = debugger._graph.native_config()["common_dump_settings"]
    debugger.close()
    assert settings["file_format"] == file_format
    # warning lines only: the debugger's info line names dump_path, which holds this test's name
    warnings = [line for line in capsys.readouterr().out.splitlines() if "[WARNING]" in line and "file_format" in line]
    if file_format == "bin":  # MindSpore's CPU backend writes .npy whatever the setting
        assert len(warnings) == 1 and "no effect on MindSpore's CPU backend" in warnings[0]
    else:
        assert warnings == []


def test_statistics_at_l2_always_asks_mindspore_for_npy(ms, tmp_path):
    debugger = _l2_debugger(tmp_path, "statistics", {})
    assert debugger._graph.native_config()["common_dump_settings"]["file_format"] == "npy"
    debugger.close()


@pytest.mark.parametrize("check_mode", ["all", "aicore", "atomic"])
def test_check_mode_has_no_effect_on_the_cpu_backend_and_says_so(ms, tmp_path, capsys, check_mode):
    debugger = _l2_debugger(tmp_path, "overflow_check", {"check_mode": check_mode})
    settings = debugger._graph.native_config()["common_dump_settings"]
    debugger.close()
    # on CPU every kernel's tensors are dumped and filtered afterwards: no native overflow detection
    assert settings["op_debug_mode"] == 0 and settings["saved_data"] == "tensor"
    warnings = [line for line in capsys.readouterr().out.splitlines() if "[WARNING]" in line and "check_mode" in line]
    assert len(warnings) == (0 if check_mode == "all" else 1)
