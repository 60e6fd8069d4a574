"""MindSpore run_ut / multi_run_ut on a real mint model: verdicts, real data, resume, SKIP rows."""
import csv
import glob
import json
import os

import numpy as np
import pytest

from msprobe.cli import main

DETAIL_HEADER = ["API Name", "Bench Dtype", "Tested Dtype", "Shape", "Cosine", "MaxAbsErr", "MaxRelativeErr",
                 "Status", "Message"]
RESULT_HEADER = ["API Name", "Forward Test Success", "Backward Test Success", "Message"]
MODEL_APIS = ["Mint.matmul.0", "MintFunctional.relu.0", "Mint.tanh.0", "Tensor.__mul__.0", "Mint.add.0",
              "Mint.matmul.1", "MintFunctional.softmax.0", "Mint.exp.0", "Mint.mean.0"]


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.setenv("MSPROBE_NO_PROGRESS", "1")


def run_ms(*argv):
    return main(["-f", "mindspore", *argv])


def reports(out_dir):
    result = glob.glob(os.path.join(str(out_dir), "accuracy_checking_result_*.csv"))
    details = glob.glob(os.path.join(str(out_dir), "accuracy_checking_details_*.csv"))
    assert len(result) == 1 and len(details) == 1
    return result[0], details[0]


def rows(path):
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))


def by_name(path):
    table = rows(path)
    return {row[0]: dict(zip(table[0], row)) for row in table[1:]}


def text(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def test_run_ut_checks_every_mint_api_of_a_real_model(ms_statistics_dump, tmp_path):
    assert run_ms("run_ut", "-api_info", ms_statistics_dump, "-o", str(tmp_path)) == 0
    result_path, details_path = reports(tmp_path)
    assert rows(result_path)[0] == RESULT_HEADER and rows(details_path)[0] == DETAIL_HEADER
    results = by_name(result_path)
    assert list(results) == MODEL_APIS
    for api in MODEL_APIS:
        assert results[api]["Forward Test Success"] == "pass", results[api]
        assert results[api]["Backward Test Success"] == "pass", results[api]
    details = by_name(details_path)
    row = details["Mint.matmul.0.forward.output.0"]
    assert row["Tested Dtype"] == "Float32" and row["Bench Dtype"] == "torch.float64"
    assert float(row["Cosine"]) > 0.99 and float(row["MaxAbsErr"]) < 1e-4
    assert "Mint.matmul.0.backward.output.1" in details      # gradient of the weight


def test_imprecise_mint_op_is_an_error_and_its_data_is_saved(ms_statistics_dump, tmp_path, monkeypatch):
    import mindspore as ms
    from mindspore import mint

    exact = mint.tanh

    def lossy_tanh(input):                       # keeps 6 fractional bits
        return mint.round(exact(input) * 64) / 64
    monkeypatch.setattr(mint, "tanh", lossy_tanh)
    assert run_ms("run_ut", "-api_info", ms_statistics_dump, "-o", str(tmp_path), "-save_error_data") == 0
    results = by_name(reports(tmp_path)[0])
    assert results["Mint.tanh.0"]["Forward Test Success"] == "error"
    assert results["Mint.matmul.0"]["Forward Test Success"] == "pass"
    saved = sorted(os.listdir(tmp_path / "error_data"))
    assert "Mint.tanh.0.forward.input.0.npy" in saved and "Mint.tanh.0.forward.output.bench.0.npy" in saved
    assert not [name for name in saved if name.startswith("Mint.matmul")]
    assert isinstance(ms.Tensor, type)


def test_real_data_mode_and_multi_run_ut_match(ms_tensor_dump, tmp_path):
    single, multi = tmp_path / "single", tmp_path / "multi"
    assert run_ms("run_ut", "-api_info", ms_tensor_dump, "-o", str(single)) == 0
    assert run_ms("multi_run_ut", "-api_info", ms_tensor_dump, "-o", str(multi), "-d", "0", "1") == 0
    for one, two in zip(reports(single), reports(multi)):
        assert text(one) == text(two)
    details = by_name(reports(single)[1])
    # real data: the dumped input reproduces the dumped output exactly through the same kernel
    tensor_dir = os.path.join(os.path.dirname(ms_tensor_dump), "dump_tensor_data")
    recorded = np.load(os.path.join(tensor_dir, "Mint.matmul.0.forward.output.0.npy"))
    assert details["Mint.matmul.0.forward.output.0"]["Shape"] == str(list(recorded.shape))
    assert {row["Forward Test Success"] for row in by_name(reports(single)[0]).values()} == {"pass"}


def test_resume_continues_the_same_files(ms_statistics_dump, tmp_path):
    full = tmp_path / "full"
    assert run_ms("run_ut", "-api_info", ms_statistics_dump, "-o", str(full)) == 0
    full_result, full_details = reports(full)
    cut = tmp_path / "cut"
    cut.mkdir()
    result, details = cut / os.path.basename(full_result), cut / os.path.basename(full_details)
    result.write_text("".join(text(full_result).splitlines(keepends=True)[:4]) + "Mint.add")   # torn line
    details.write_text("".join(text(full_details).splitlines(keepends=True)[:8]))
    assert run_ms("run_ut", "-api_info", ms_statistics_dump, "-csv_path", str(result)) == 0
    assert text(result) == text(full_result) and text(details) == text(full_details)


def test_missing_kernels_and_unsupported_apis_are_skip_rows(tmp_path):
    tensor = {"type": "mindspore.Tensor", "dtype": "Float32", "shape": [4, 8], "Max": 1.0, "Min": -1.0}
    bf16 = dict(tensor, dtype="BFloat16")
    data = {
        "MintFunctional.gelu.0.forward": {"input_args": [tensor], "input_kwargs": {}, "output": [tensor]},
        "MintFunctional.layer_norm.0.forward": {"input_args": [tensor, [{"type": "int", "value": 8}]],
                                                "input_kwargs": {}, "output": [tensor]},
        "Mint.exp.0.forward": {"input_args": [bf16], "input_kwargs": {}, "output": [bf16]},
        "Functional.relu.0.forward": {"input_args": [tensor], "input_kwargs": {}, "output": [tensor]},
        "Tensor.storage_offset.0.forward": {"input_args": [tensor], "input_kwargs": {}, "output": []},
        "Mint.sqrt.0.forward": {"input_args": [dict(tensor, Min=0.1)], "input_kwargs": {}, "output": [tensor]},
    }
    dump = tmp_path / "dump.json"
    dump.write_text(json.dumps({"task": "statistics", "level": "L1", "framework": "mindspore", "data": data}))
    assert run_ms("run_ut", "-api_info", str(dump), "-o", str(tmp_path / "o")) == 0
    results = by_name(reports(tmp_path / "o")[0])
    for api in ("MintFunctional.gelu.0", "MintFunctional.layer_norm.0", "Mint.exp.0"):
        assert results[api]["Forward Test Success"] == "SKIP" and "run failed" in results[api]["Message"], results[api]
    assert "mint" in results["Functional.relu.0"]["Message"]
    assert "not in the list" in results["Tensor.storage_offset.0"]["Message"]
    assert results["Mint.sqrt.0"]["Forward Test Success"] == "pass"


def test_bench_falls_back_to_upcast_mindspore_without_torch(ms_statistics_dump):
    from msprobe.core.run_ut.api_info import load_api_cases
    from msprobe.mindspore.api_accuracy_checker.executor import make_executor

    cases = {case.name: case for case in load_api_cases(ms_statistics_dump).cases}
    execute = make_executor({"torch_bench": False, "tensor_dir": None})
    outcome = execute(cases["Mint.tanh.0"])
    assert outcome["forward"] == "pass" and outcome["backward"] == "pass"
    assert outcome["details"][0]["bench_dtype"] == "Float64"


def _linear_transpose_dump(out_dir):
    """L1 statistics dump of mint.nn.Linear layers (recorded as Primitive.dense.Dense) and both forms
    of Tensor.transpose: two dims swapped, and a permutation."""
    import mindspore as ms
    from mindspore import Tensor, mint, nn

    from msprobe.mindspore import PrecisionDebugger

    class LinearTranspose(nn.Cell):
        def __init__(self):
            super().__init__()
            self.proj = mint.nn.Linear(8, 6)
            self.out = mint.nn.Linear(6, 4, bias=False)

        def construct(self, x):
            h = self.out(self.proj(x))
            return mint.sum(mint.matmul(h.transpose(0, 2, 1), h.transpose(-1, -2).transpose(0, 2, 1)))

    from ms_runtime import mindspore_on_cpu

    mindspore_on_cpu()
    net = LinearTranspose()
    debugger = PrecisionDebugger(task="statistics", dump_path=str(out_dir), level="L1")
    debugger.start(net)
    ms.grad(net)(Tensor(np.random.RandomState(2).randn(2, 3, 8).astype(np.float32)))
    debugger.stop()
    debugger.close()
    return os.path.join(str(out_dir), "step0", "rank", "dump.json")


def test_mint_linear_primitives_and_tensor_transpose_are_checked_and_pass(tmp_path):
    dump = _linear_transpose_dump(tmp_path / "dump")
    assert run_ms("run_ut", "-api_info", dump, "-o", str(tmp_path / "o")) == 0
    results = by_name(reports(tmp_path / "o")[0])
    expected = ["Primitive.dense.Dense.0", "Primitive.dense.Dense.1", "Tensor.transpose.0", "Tensor.transpose.1",
                "Tensor.transpose.2"]
    assert [name for name in results if name in expected] == expected
    for api in expected:
        assert results[api]["Forward Test Success"] == "pass", results[api]
        assert results[api]["Backward Test Success"] == "pass", results[api]
    details = by_name(reports(tmp_path / "o")[1])
    assert details["Primitive.dense.Dense.0.forward.output.0"]["Bench Dtype"] == "torch.float64"
    assert "Primitive.dense.Dense.0.backward.output.1" in details    # gradient of the weight


def test_softmax_backward_that_is_truly_zero_passes(tmp_path):
    """Each row of the softmax output gets the same gradient: the true input gradient is exactly 0 and
    the computed one rounding noise, whose cosine to the bench's noise is arbitrary."""
    import mindspore as ms
    from mindspore import Tensor, mint

    from msprobe.mindspore import PrecisionDebugger
    from ms_runtime import mindspore_on_cpu

    mindspore_on_cpu()
    rng = np.random.RandomState(0)
    x, row_weights = rng.randn(16, 32).astype(np.float32), Tensor(rng.randn(16).astype(np.float32))

    def f(a):
        return mint.sum(mint.sum(mint.nn.functional.softmax(a * 3.0, dim=-1), -1) * row_weights)
    debugger = PrecisionDebugger(task="tensor", dump_path=str(tmp_path / "dump"), level="L1")
    debugger.start()
    grad = ms.grad(f)(Tensor(x))
    debugger.stop()
    debugger.close()
    assert np.abs(grad.asnumpy()).max() < 1e-6      # zero up to rounding
    dump = str(tmp_path / "dump" / "step0" / "rank" / "dump.json")
    assert run_ms("run_ut", "-api_info", dump, "-o", str(tmp_path / "o")) == 0
    assert by_name(reports(tmp_path / "o")[0])["MintFunctional.softmax.0"]["Backward Test Success"] == "pass"
    row = by_name(reports(tmp_path / "o")[1])["MintFunctional.softmax.0.backward.output.0"]
    assert row["Status"] == "pass" and "zero up to rounding" in row["Message"], row
