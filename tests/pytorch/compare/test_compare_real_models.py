"""Compare dumps of real models: identical runs, bf16 vs fp32, other seeds, a broken layer, bad files."""
import json
import os
import shutil

import numpy as np
import openpyxl
import pytest

from msprobe.core.compare import CompareOptions, compare_dumps
from msprobe.core.compare.judge import RED, RED_MESSAGES
from msprobe.core.errors import ParseError


def _compare(dumps, npu, bench, out, **options):
    options.setdefault("timestamp", "1")
    options.setdefault("progress", False)
    outcome = compare_dumps(os.path.join(dumps[npu], "dump.json"), os.path.join(dumps[bench], "dump.json"),
                            str(out), CompareOptions(**options))
    return outcome[0]


def _column(result, name):
    return result.columns[name]


def test_identical_runs_pass_everywhere(dumps, tmp_path):
    result = _compare(dumps, "stat_fp32", "stat_fp32_again", tmp_path).result
    assert set(_column(result, "Result")) == {None}
    assert result.color.max() == 0
    assert "NPU_Stack_Info" in result.header  # stack.json beside dump.json is picked up
    assert "N/A" not in _column(result, "Bench Name")


def test_bf16_run_matches_fp32_run(dumps, tmp_path):
    outcome = _compare(dumps, "stat_bf16", "stat_fp32", tmp_path)
    result = outcome.result
    assert "N/A" not in _column(result, "Bench Name"), "every bf16 row must find its fp32 row"
    dtypes = set(zip(_column(result, "NPU Dtype"), _column(result, "Bench Dtype")))
    assert ("torch.bfloat16", "torch.float32") in dtypes
    messages = [m or "" for m in _column(result, "Err_message")]
    assert not any("Dtype" in m or "No bench data" in m for m in messages)
    diffs = [d for d in _column(result, "Max diff") if isinstance(d, float)]
    assert 0 < max(abs(d) for d in diffs) < 0.05  # bf16 rounding, not garbage


def test_bf16_tensor_run_matches_fp32_tensor_run(tmp_path):
    from compare_models import dump_mlp

    npu = dump_mlp(str(tmp_path / "bf16"), task="tensor", dtype="bf16")
    bench = dump_mlp(str(tmp_path / "fp32"), task="tensor")
    result = compare_dumps(os.path.join(npu, "dump.json"), os.path.join(bench, "dump.json"), str(tmp_path / "o"),
                           CompareOptions(progress=False))[0].result
    cosine = [c for c, name in zip(_column(result, "Cosine"), _column(result, "NPU Name"))
              if isinstance(c, float) and ".forward." in name]
    assert len(cosine) > 20 and min(cosine) > 0.99


def test_different_seeds_diverge_and_advisor_names_a_row(dumps, tmp_path):
    outcome = _compare(dumps, "tensor_seed2", "tensor_fp32", tmp_path)
    verdicts = _column(outcome.result, "Accuracy Reached or Not")
    assert verdicts.count("No") > 10
    first_no = verdicts.index("No")
    with open(outcome.advisor_path) as handle:
        text = handle.read()
    # the first differing row is the weight operand of l1's linear call; the parameter row holding the
    # same tensor is named (the parameter is the finding), saying where it was first seen
    first_name = _column(outcome.result, "NPU Name")[first_no]
    assert first_name == "Functional.linear.0.forward.input.1"
    assert "Suspect Nodes: Module.l1.Linear.forward.0.parameters.weight\n" in text
    assert f"(first seen as {first_name})" in text


@pytest.mark.parametrize("npu, bench", [("tensor_broken", "tensor_fp32"), ("stat_broken", "stat_fp32")])
def test_broken_layer_is_first_highlighted_row(dumps, tmp_path, npu, bench):
    outcome = _compare(dumps, npu, bench, tmp_path)
    _, _, _ = outcome.xlsx_path, None, None
    result = outcome.result
    first = int(np.flatnonzero(result.color)[0])
    assert _column(result, "NPU Name")[first] == "Module.act.GELU.forward.0.output.0"
    assert result.color[first] == RED
    sheet = openpyxl.load_workbook(outcome.xlsx_path).worksheets[0]
    filled = [row[0].value for row in sheet.iter_rows(min_row=2) if row[0].fill.fill_type]
    assert filled[0] == "Module.act.GELU.forward.0.output.0"
    # the extra ops of the broken layer exist only on the NPU side: reported, not dropped
    assert any(name.startswith(("Tensor.mul.", "Tensor.__mul__.")) for name in _column(result, "NPU Name"))


def test_nan_in_npu_data_is_red(dumps, tmp_path):
    result = _compare(dumps, "stat_nan", "stat_fp32", tmp_path).result
    first = int(np.flatnonzero(result.color)[0])
    assert RED_MESSAGES["nan_inf"] in _column(result, "Err_message")[first]
    assert _column(result, "NPU Name")[first] == "Functional.linear.0.forward.input.0"


def test_md5_mode(dumps, tmp_path):
    result = _compare(dumps, "md5_fp32", "md5_seed2", tmp_path).result
    assert result.header[6:9] == ["NPU MD5", "BENCH MD5", "Result"]
    results = _column(result, "Result")
    assert "Different" in results and "pass" in results
    same = _compare(dumps, "md5_fp32", "md5_fp32", tmp_path / "same").result
    assert set(_column(same, "Result")) == {"pass"}


def test_missing_tensor_file_and_shape_mismatch_are_rows(dumps, tmp_path):
    npu = shutil.copytree(dumps["tensor_broken"], str(tmp_path / "npu"))
    data = os.path.join(npu, "dump_tensor_data")
    os.remove(os.path.join(data, "Functional.linear.0.forward.input.0.pt"))
    import torch

    torch.save(torch.zeros(3, 3), os.path.join(data, "Functional.linear.0.forward.input.1.pt"))
    torch.save(torch.zeros(5), os.path.join(data, "Functional.linear.0.forward.input.2.pt"))
    with open(os.path.join(npu, "dump.json")) as handle:
        dump = json.load(handle)
    dump["dump_data_dir"] = data
    dump["data"]["Functional.linear.0.forward"]["input_args"][1]["shape"] = [3, 3]  # recorded like the file
    with open(os.path.join(npu, "dump.json"), "w") as handle:
        json.dump(dump, handle)
    result = compare_dumps(os.path.join(npu, "dump.json"), os.path.join(dumps["tensor_fp32"], "dump.json"),
                           str(tmp_path / "out"), CompareOptions(progress=False))[0].result
    names, messages = _column(result, "NPU Name"), _column(result, "Err_message")
    missing = names.index("Functional.linear.0.forward.input.0")
    assert "Dump file:" in messages[missing] and "not found" in messages[missing]
    mismatch = names.index("Functional.linear.0.forward.input.1")
    assert "Shape of NPU and bench Tensor do not match" in messages[mismatch]
    assert _column(result, "Accuracy Reached or Not")[mismatch] == "Unmatched"
    inconsistent = names.index("Functional.linear.0.forward.input.2")
    assert "holds shape [5] but dump.json records [32]" in messages[inconsistent]


def test_corrupt_dump_json_names_the_file(dumps, tmp_path):
    bad = tmp_path / "dump.json"
    with open(os.path.join(dumps["stat_fp32"], "dump.json")) as handle:
        bad.write_text(handle.read()[:-40])
    with pytest.raises(ParseError, match="dump.json"):
        compare_dumps(str(bad), os.path.join(dumps["stat_fp32"], "dump.json"), str(tmp_path / "o"))


@pytest.mark.parametrize("task", ["statistics", "tensor"])
def test_fuzzy_match_survives_an_extra_call(tmp_path, task):
    from compare_models import dump_mlp

    npu = dump_mlp(str(tmp_path / "npu"), task=task, level="L1", extra_call=True)
    bench = dump_mlp(str(tmp_path / "bench"), task=task, level="L1")
    args = (os.path.join(npu, "dump.json"), os.path.join(bench, "dump.json"), str(tmp_path / "out"))
    exact = compare_dumps(*args, CompareOptions(progress=False, timestamp="e"))[0].result
    fuzzy = compare_dumps(*args, CompareOptions(progress=False, timestamp="f", fuzzy_match=True))[0].result
    names = _column(fuzzy, "NPU Name")
    model_gelu = names.index("Functional.gelu.1.forward.output.0")
    # exact names, paired within their call site (stack.json, level L1): the model's gelu is gelu.1 on the NPU
    # side and gelu.0 on the bench side, the extra call's site is another line
    assert _column(exact, "Bench Name")[model_gelu] == "Functional.gelu.0.forward.output.0"
    for side in (npu, bench):
        os.remove(os.path.join(side, "stack.json"))
    by_name = compare_dumps(*args, CompareOptions(progress=False, timestamp="n"))[0].result
    assert _column(by_name, "Bench Name")[model_gelu] == "N/A"  # names alone: gelu.1 is not on the bench side
    assert _column(fuzzy, "Bench Name")[model_gelu] == "Functional.gelu.0.forward.output.0"
    if task == "statistics":
        assert _column(fuzzy, "Result")[model_gelu] is None  # the right pair: identical data
        assert _column(fuzzy, "Err_message")[model_gelu] is None
    else:
        assert (_column(fuzzy, "Cosine")[model_gelu], _column(fuzzy, "MaxAbsErr")[model_gelu]) == (1.0, 0.0)
        assert _column(fuzzy, "Err_message")[model_gelu] == \
            "Fuzzy matching data, the comparison accuracy may be affected."
    extra = names.index("Functional.gelu.0.forward.output.0")
    assert _column(fuzzy, "Bench Name")[extra] == "N/A"  # the extra call is reported, not paired


def test_l0_module_rows_with_parameters_and_gradients(tmp_path):
    """An L0 (module-only) bf16 run against its fp32 run: forward, backward, parameters and
    parameters_grad rows of every module pair up and carry small, real differences."""
    from compare_models import dump_mlp

    npu = dump_mlp(str(tmp_path / "bf16"), task="statistics", level="L0", dtype="bf16")
    bench = dump_mlp(str(tmp_path / "fp32"), task="statistics", level="L0")
    result = compare_dumps(os.path.join(npu, "dump.json"), os.path.join(bench, "dump.json"), str(tmp_path / "o"),
                           CompareOptions(progress=False))[0].result
    names = _column(result, "NPU Name")
    assert names == _column(result, "Bench Name") and all(name.startswith("Module.") for name in names)
    for name in ("Module.l1.Linear.forward.0.parameters.weight", "Module.ln.LayerNorm.forward.0.parameters.bias",
                 "Module.l2.Linear.parameters_grad.weight", "Module.l1.Linear.parameters_grad.bias",
                 "Module.act.GELU.backward.0.output.0", "Module.l2.Linear.forward.0.output.0"):
        row = names.index(name)
        assert _column(result, "NPU Dtype")[row] == "torch.bfloat16"
        assert _column(result, "Bench Dtype")[row] == "torch.float32"
        assert abs(_column(result, "Max diff")[row]) < 0.05, name
    grad = names.index("Module.l2.Linear.parameters_grad.weight")
    assert _column(result, "Max diff")[grad] != 0.0  # bf16 gradients really differ


def test_bench_only_rows_are_appended(dumps, tmp_path):
    """The broken layer's extra ops exist only on the bench side here: they end the report."""
    result = _compare(dumps, "stat_fp32", "stat_broken", tmp_path).result
    npu_names, bench_names = _column(result, "NPU Name"), _column(result, "Bench Name")
    extra = [i for i, name in enumerate(npu_names) if name == "N/A"]
    assert extra and extra == list(range(len(npu_names) - len(extra), len(npu_names)))
    # y * 3.0 - 0.5: Tensor.__mul__ / Tensor.__sub__ (Tensor.mul / Tensor.sub in dumps of older versions)
    assert {bench_names[i].split(".")[1].strip("_") for i in extra} == {"mul", "sub"}
    for i in extra:
        assert _column(result, "Result")[i] == "N/A"
        assert _column(result, "Err_message")[i] == "No NPU data matched."
    tensors = [i for i in extra if _column(result, "Bench Dtype")[i] == "torch.float32"]
    assert tensors and all(isinstance(_column(result, "Bench max")[i], float) for i in tensors)
