"""The advisor names the call that breaks, not its consequences: real conv / LSTM / linear models and a
tiny transformers Llama, one layer scaled by 1 % or 5 % on the NPU side, fp32 and bf16 against fp32,
tensor and statistics modes; clean bf16 runs against fp32 raise no suspect and no red row."""
import os
import re

import numpy as np
import pytest

from compare_models import as_statistics_dump, dump_model, fault_entry
from msprobe.core.compare import CompareOptions, compare_tables
from msprobe.core.compare.advisor import advisor_text
from msprobe.core.io.load import load_dump
from msprobe.core.compare.records import PHASES

RUNS = [("conv", "fp32", None), ("conv", "bf16", None), ("conv", "fp32", 0.05), ("conv", "bf16", 0.05),
        ("lstm", "fp32", None), ("lstm", "bf16", None), ("lstm", "fp32", 0.05), ("lstm", "bf16", 0.05),
        ("linear", "fp32", None), ("linear", "bf16", None), ("linear", "fp32", 0.05), ("linear", "bf16", 0.05),
        ("llama", "fp32", None), ("llama", "bf16", None), ("llama", "fp32", 0.01), ("llama", "bf16", 0.01),
        ("llama", "fp32", 0.05), ("llama", "bf16", 0.05)]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """(kind, dtype, fault) -> {'tensor': dump.json, 'statistics': the same run as a statistics dump}."""
    root = tmp_path_factory.mktemp("advisor_runs")
    found = {}
    for kind, dtype, fault in RUNS:
        name = f"{kind}_{dtype}_{fault}"
        tensor = dump_model(str(root / name), kind, dtype=dtype, fault=fault)
        found[(kind, dtype, fault)] = {"tensor": tensor,
                                       "statistics": as_statistics_dump(tensor, str(root / f"{name}_stat" / "dump.json"))}
    return found


def _compare(runs, npu_run, mode):
    bench_run = (npu_run[0], "fp32", None)
    return compare_tables(load_dump(runs[npu_run][mode]), load_dump(runs[bench_run][mode]),
                          CompareOptions(progress=False))


def _assert_names_the_fault(runs, run, mode):
    records = _compare(runs, run, mode)
    kind, dtype, fault = run
    suspect = records.suspect
    assert suspect is not None, advisor_text(records)
    # the multiplication by 1 + fault, or the layer (module) that makes it
    layer = {"conv": "conv2", "lstm": "lstm", "linear": "l2", "llama": "model.layers.1.mlp.act_fn"}[kind]
    assert (suspect.entry == fault_entry(runs[run]["tensor"], 1 + fault)
            or suspect.entry.startswith(f"Module.{layer}.Scaled.forward")), advisor_text(records)
    assert (suspect.kind, suspect.phase) == ("cause", "forward")
    text = advisor_text(records)
    # the reason: which statistic, by how much, and what was checked
    reason = text.splitlines()[2]
    assert reason.startswith("Reason: forward call") and "inputs agree" in reason
    share = re.search(r"([0-9.]+)% of the tensor's magnitude", reason)
    assert share and float(share.group(1)) == pytest.approx(fault * 100, rel=0.1), reason
    assert "inputs checked and within tolerance: input.0" in text
    # rows beyond tolerance before the suspect's can only be the enclosing modules' (a module entry is
    # recorded when the module is entered, before the calls inside it)
    earlier = [records.names[i] for i in np.flatnonzero(records.judgement.suspicious) if i < suspect.row]
    assert all(name.startswith("Module.") for name in earlier), earlier


@pytest.mark.parametrize("mode", ["tensor", "statistics"])
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("kind", ["conv", "lstm", "linear"])
def test_broken_layer_is_the_advisors_suspect(runs, kind, dtype, mode):
    _assert_names_the_fault(runs, (kind, dtype, 0.05), mode)


@pytest.mark.parametrize("mode", ["tensor", "statistics"])
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("fault", [0.01, 0.05])
def test_scaled_activation_in_llama_is_the_advisors_suspect(runs, fault, dtype, mode):
    _assert_names_the_fault(runs, ("llama", dtype, fault), mode)


def test_one_percent_fault_in_bf16_is_found_by_the_norm(runs):
    """1 % is 1.28 bf16 epsilons: only an aggregate (Norm) sees it above bf16 rounding."""
    records = _compare(runs, ("llama", "bf16", 0.01), "statistics")
    text = advisor_text(records)
    assert "Norm off by 1.2" in text and "bf16 eps (allowed 0.5" in text, text


@pytest.mark.parametrize("mode", ["tensor", "statistics"])
@pytest.mark.parametrize("kind", ["conv", "lstm", "linear", "llama"])
def test_clean_bf16_run_has_no_suspect_and_no_red_row(runs, kind, mode):
    records = _compare(runs, (kind, "bf16", None), mode)
    assert records.suspect is None, advisor_text(records)
    assert int((records.color == 2).sum()) == 0
    # forward rows beyond tolerance (the loss's pow squares the bf16 rounding) are amplification or its
    # consequences, and the report says so
    forward = records.phases == PHASES.index("forward")
    beyond = set(np.flatnonzero(records.judgement.suspicious & forward).tolist())
    assert beyond <= set(records.extra["amplified"]) | set(records.extra["consequence"])
    # near-zero statistics are judged against the tensor's magnitude: a Min of 0 against a tiny value passes
    min_scores = records.judgement.scores[:, 1]
    tiny_min = (np.abs(records.bench_stats[:, 1]) < 1e-6) & (records.npu_stats[:, 1] != records.bench_stats[:, 1])
    assert np.all(np.nan_to_num(min_scores[tiny_min]) <= records.judgement.allowed[tiny_min, 1])
    assert "No suspect found" in advisor_text(records)


def test_fp32_against_itself_is_exactly_equal(runs):
    records = _compare(runs, ("llama", "fp32", None), "tensor")
    assert records.suspect is None and not records.judgement.suspicious.any()
    assert np.nanmax(records.judgement.scores) == 0


def test_xlsx_marks_the_suspect_and_is_readable(runs, tmp_path):
    import openpyxl

    from msprobe.core.compare import compare_dumps

    run = ("llama", "bf16", 0.05)
    outcome = compare_dumps(runs[run]["statistics"], runs[("llama", "fp32", None)]["statistics"], str(tmp_path),
                            CompareOptions(progress=False, timestamp="1"))[0]
    sheet = openpyxl.load_workbook(outcome.xlsx_path).worksheets[0]
    assert sheet.freeze_panes == "A2"
    assert sheet.auto_filter.ref == f"A1:{sheet.cell(1, sheet.max_column).column_letter}{sheet.max_row}"
    header = [cell.value for cell in sheet[1]]
    assert header[-1] == "Suspicion"
    assert sheet.column_dimensions["A"].width >= 30  # sized to the row names
    suspect = outcome.records.suspect
    row = sheet[suspect.row + 2]
    assert row[0].value == suspect.name and row[0].font.b
    assert row[-1].value.startswith("Advisor's suspect: ")
    assert not sheet[2][0].font.b
    assert os.path.isfile(outcome.advisor_path)
