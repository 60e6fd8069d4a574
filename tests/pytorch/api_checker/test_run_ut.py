"""run_ut on dumps of real models: verdicts, real-data mode, lists, error data, SKIP rows."""
import json
import os

import pytest
import torch
import torch.nn.functional as F

from pt_run_ut_helpers import read_rows, report_paths, results_by_api, run_cli


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.setenv("MSPROBE_NO_PROGRESS", "1")


def lossy_bf16_gelu(monkeypatch):
    """Replace F.gelu, for bfloat16 inputs only, by a version that keeps 5 fractional bits."""
    exact = F.gelu

    def gelu(input, *args, **kwargs):
        out = exact(input, *args, **kwargs)
        if input.dtype == torch.bfloat16:
            out = torch.round(out * 32) / 32
        return out
    monkeypatch.setattr(F, "gelu", gelu)


def test_imprecise_bf16_op_fails_while_ordinary_ops_pass(bf16_statistics_dump, tmp_path, monkeypatch):
    lossy_bf16_gelu(monkeypatch)
    assert run_cli("run_ut", "-api_info", bf16_statistics_dump, "-o", str(tmp_path)) == 0
    results = results_by_api(tmp_path)
    assert results["Functional.gelu.0"]["Forward Test Success"] == "error"
    for api in ("Functional.linear.0", "Functional.layer_norm.0", "Functional.linear.1", "Functional.softmax.0"):
        assert results[api]["Forward Test Success"] == "pass", results[api]
        assert results[api]["Backward Test Success"] == "pass", results[api]
    details = {row["API name"]: row for row in read_rows(report_paths(tmp_path)[1])}
    gelu = details["Functional.gelu.0.forward.output.0"]
    assert gelu["DEVICE Dtype"] == "torch.bfloat16" and gelu["Bench Dtype"] == "torch.float32"
    assert float(gelu["双百指标"]) < 0.99 and gelu["Status"] == "error"


def test_same_dump_without_the_fault_passes_everywhere(bf16_statistics_dump, tmp_path):
    assert run_cli("run_ut", "-api_info", bf16_statistics_dump, "-o", str(tmp_path)) == 0
    results = results_by_api(tmp_path)
    assert len(results) == 7
    assert {row["Forward Test Success"] for row in results.values()} == {"pass"}


def test_real_data_mode_reruns_the_dumped_tensors(fp32_tensor_dump, tmp_path):
    assert run_cli("run_ut", "-api_info", fp32_tensor_dump, "-o", str(tmp_path)) == 0
    details = {row["API name"]: row for row in read_rows(report_paths(tmp_path)[1])}
    row = details["Functional.linear.0.forward.output.0"]
    assert row["Bench Dtype"] == "torch.float64" and row["Status"] == "pass"
    # the dumped input gives exactly the dumped output statistics back
    with open(fp32_tensor_dump) as handle:
        recorded = json.load(handle)["data"]["Functional.linear.0.forward"]["output"][0]
    tensor_dir = os.path.join(os.path.dirname(fp32_tensor_dump), "dump_tensor_data")
    out = torch.load(os.path.join(tensor_dir, recorded["data_name"]))
    assert float(out.max()) == pytest.approx(recorded["Max"])
    assert row["ULP误差最大值"] != ""      # linear is judged by the ULP standard


def test_white_list_and_black_list_from_config(bf16_statistics_dump, tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"task": "run_ut", "dump_path": "./", "run_ut": {"white_list": ["linear", "gelu"],
                                                                                  "black_list": ["gelu"]}}))
    out = tmp_path / "out"
    assert run_cli("run_ut", "-api_info", bf16_statistics_dump, "-o", str(out), "-config", str(config)) == 0
    results = results_by_api(out)
    assert results["Functional.linear.0"]["Forward Test Success"] == "pass"
    for api in ("Functional.gelu.0", "Functional.softmax.0", "Tensor.mean.0"):
        assert results[api]["Forward Test Success"] == "SKIP"
        assert "white_list/black_list" in results[api]["Message"]


def test_save_error_data_keeps_inputs_and_outputs_of_failing_apis(bf16_statistics_dump, tmp_path, monkeypatch):
    lossy_bf16_gelu(monkeypatch)
    monkeypatch.chdir(tmp_path)
    assert run_cli("run_ut", "-api_info", bf16_statistics_dump, "-o", "out", "-save_error_data") == 0
    folders = [name for name in os.listdir("out") if name.startswith("ut_error_data")]
    assert len(folders) == 1
    saved = sorted(os.listdir(os.path.join("out", folders[0])))
    assert "Functional.gelu.0.forward.input.0.pt" in saved
    assert "Functional.gelu.0.forward.output.bench.0.pt" in saved
    assert not [name for name in saved if name.startswith("Functional.linear")]


def test_unsupported_and_failing_apis_become_skip_rows(tmp_path):
    tensor = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [4], "Max": 1.0, "Min": -1.0,
              "requires_grad": False}
    data = {
        "Distributed.all_reduce.0.forward": {"input_args": [tensor], "input_kwargs": {}, "output": [tensor]},
        "NPU.npu_fusion_attention.0.forward": {"input_args": [tensor], "input_kwargs": {}, "output": [tensor]},
        "Torch.no_such_api.0.forward": {"input_args": [tensor], "input_kwargs": {}, "output": [tensor]},
        "Functional.dropout.0.forward": {"input_args": [tensor], "input_kwargs": {}, "output": [tensor]},
        "Torch.matmul.0.forward": {"input_args": [tensor, dict(tensor, shape=[3, 5])], "input_kwargs": {},
                                   "output": [tensor]},
        "Torch.exp.0.forward": {"input_args": [tensor], "input_kwargs": {}, "output": [tensor]},
        # recorded with a backward, but an index output carries no gradient
        "Torch.argmax.0.forward": {"input_args": [dict(tensor, requires_grad=True)], "input_kwargs": {},
                                   "output": [dict(tensor, dtype="torch.int64", shape=[])]},
        "Torch.argmax.0.backward": {"input": [dict(tensor, shape=[])], "output": [tensor]},
    }
    dump = tmp_path / "dump.json"
    dump.write_text(json.dumps({"task": "statistics", "level": "L1", "framework": "pytorch", "data": data}))
    assert run_cli("run_ut", "-api_info", str(dump), "-o", str(tmp_path / "out")) == 0
    results = results_by_api(tmp_path / "out")
    assert "communication" in results["Distributed.all_reduce.0"]["Message"]
    assert "NPU" in results["NPU.npu_fusion_attention.0"]["Message"]
    assert "does not exist" in results["Torch.no_such_api.0"]["Message"]
    assert "random" in results["Functional.dropout.0"]["Message"]
    assert "run failed" in results["Torch.matmul.0"]["Message"]
    for api in ("Distributed.all_reduce.0", "NPU.npu_fusion_attention.0", "Torch.no_such_api.0", "Torch.matmul.0"):
        assert results[api]["Forward Test Success"] == "SKIP"
    assert results["Torch.exp.0"]["Forward Test Success"] == "pass"
    argmax = results["Torch.argmax.0"]
    assert (argmax["Forward Test Success"], argmax["Backward Test Success"]) == ("pass", "SKIP")
    assert argmax["Message"] == "backward: no differentiable output or input"
    details = {row["API name"]: row for row in read_rows(report_paths(tmp_path / "out")[1])}
    assert details["Torch.matmul.0.forward"]["Status"] == "SKIP"
    assert details["Torch.matmul.0.forward"]["Message"].startswith("run failed: RuntimeError")
    assert details["Torch.argmax.0.forward.output.0"]["二进制一致错误率"] == "0.0"


def test_bad_inputs_are_user_errors(tmp_path, capsys):
    assert run_cli("run_ut", "-api_info", str(tmp_path / "missing.json")) == 1
    log = capsys.readouterr().out
    assert "[ERROR]" in log and "does not exist" in log
    bad = tmp_path / "accuracy_checking_result_x.csv"
    bad.write_text("API name,Forward Test Success,Backward Test Success,Message\n")
    dump = tmp_path / "dump.json"
    dump.write_text(json.dumps({"task": "statistics", "data": {}}))
    assert run_cli("run_ut", "-api_info", str(dump), "-csv_path", str(bad)) == 1
    assert "details file" in capsys.readouterr().out


def test_softmax_backward_that_is_truly_zero_passes(tmp_path):
    """Each row of the softmax output gets the same gradient, so the true input gradient is exactly 0;
    the float32 one is rounding noise (~1e-7) whose cosine to the float64 noise is arbitrary."""
    from msprobe.pytorch import PrecisionDebugger

    torch.manual_seed(0)
    x = torch.randn(16, 32, requires_grad=True)
    row_weights = torch.randn(16)
    debugger = PrecisionDebugger(task="tensor", dump_path=str(tmp_path / "dump"), level="L1")
    debugger.start()
    (F.softmax(x * 3.0, dim=-1).sum(-1) * row_weights).sum().backward()
    debugger.stop()
    debugger.close()
    assert x.grad.abs().max() < 1e-6      # zero up to rounding
    dump = str(tmp_path / "dump" / "step0" / "rank" / "dump.json")
    assert run_cli("run_ut", "-api_info", dump, "-o", str(tmp_path / "out")) == 0
    assert results_by_api(tmp_path / "out")["Functional.softmax.0"]["Backward Test Success"] == "pass"
    details = {row["API name"]: row for row in read_rows(report_paths(tmp_path / "out")[1])}
    row = details["Functional.softmax.0.backward.output.0"]
    assert row["Status"] == "pass" and "zero up to rounding" in row["Message"], row


def test_calls_made_under_autocast_are_replayed_under_autocast_not_skipped(tmp_path):
    """A model trained with fp16 autocast on the CPU: the dump records each linear's arguments before
    autocast casts them (an fp16 activation, fp32 weight and bias; an fp16 output). Replayed as recorded
    they fail ('mat1 and mat2 must have the same dtype') and were SKIP; they are checked in fp16 against
    a float64 bench of the fp16-rounded inputs, forward and backward (the float32 weight's gradient
    judged as the fp16 result it is), and pass."""
    from msprobe.pytorch import PrecisionDebugger

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    x = torch.randn(64, 32)
    debugger = PrecisionDebugger(task="tensor", dump_path=str(tmp_path / "dump"), level="L1")
    debugger.start()
    with torch.autocast("cpu", dtype=torch.float16):
        out = model(x)
    out.float().pow(2).mean().backward()
    debugger.stop()
    debugger.close()
    dump = str(tmp_path / "dump" / "step0" / "rank" / "dump.json")
    assert run_cli("run_ut", "-api_info", dump, "-o", str(tmp_path / "out")) == 0
    results = results_by_api(tmp_path / "out")
    linears = [name for name in results if name.startswith("Functional.linear.")]
    assert len(linears) == 2, results
    details = {row["API name"]: row for row in read_rows(report_paths(tmp_path / "out")[1])}
    for name in linears:
        assert results[name]["Forward Test Success"] == "pass", results[name]
        assert results[name]["Backward Test Success"] == "pass", results[name]
        row = details[f"{name}.forward.output.0"]
        assert (row["DEVICE Dtype"], row["Bench Dtype"]) == ("torch.float16", "torch.float64"), row
    # the second linear's fp16 output, recomputed here: its input (fp16 relu output) times the weight in fp16
    hidden = torch.relu(torch.nn.functional.linear(x.half(), model[0].weight.half(), model[0].bias.half()))
    want = torch.nn.functional.linear(hidden.double(), model[2].weight.half().double(), model[2].bias.half().double())
    assert torch.allclose(out.double(), want, rtol=2e-2, atol=2e-3)
