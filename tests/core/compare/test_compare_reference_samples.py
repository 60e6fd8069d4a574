"""Compare the reference's own sample dumps and check our reports against the reports it made."""
import pytest

from msprobe.core.compare import CompareOptions, compare_dumps
from msprobe.core.compare.judge import RED_MESSAGES
from msprobe.core.compare.render import ADDED_METRICS

from compare_samples import read_xlsx, sample_dump, sample_report

NUMERIC_TOLERANCE = 1e-6
MEMORY_FORMAT_ROW = "Torch.ones_like.0.forward.input.memory_format"


def _own_semantics(header, row):
    """Cells where we knowingly differ from the reference (docs/compare.md, "Differences"), with our
    value: equal non-tensor arguments (and None outputs) are compared by value instead of being
    "No bench data matched.", and a torch.memory_format argument keeps its type name."""
    cells = {}
    if row[header.index("NPU Dtype")] in (None, "None") or row[header.index("NPU Dtype")].startswith("<class"):
        cells["Err_message"] = None
    if row[0] == MEMORY_FORMAT_ROW:
        cells.update({"NPU Dtype": "<class 'torch.memory_format'>", "Bench Dtype": "<class 'torch.memory_format'>"})
    return cells


def _compare(npu, bench, out_dir, **kwargs):
    """Our report without the columns we add after 1.2.1's: added metrics (metrics.TENSOR_METRIC_TABLE entries
    that are not 1.2.1's) and Suspicion, the last one."""
    outcome = compare_dumps(sample_dump(npu), sample_dump(bench), out_dir,
                            CompareOptions(timestamp="1", progress=False, **kwargs))[0]
    header, rows, fills = read_xlsx(outcome.xlsx_path)
    ours = set(ADDED_METRICS) | {"Suspicion"}
    keep = [i for i, column in enumerate(header) if column not in ours]
    assert keep == list(range(len(keep))), "added columns come after 1.2.1's"
    header, rows = [header[i] for i in keep], [[row[i] for i in keep] for row in rows]
    return outcome, (header, rows, fills)


def _assert_cells_equal(header, ours, theirs, skip=(), own_semantics=None):
    assert len(ours) == len(theirs)
    for our_row, their_row in zip(ours, theirs):
        own = own_semantics(header, our_row) if own_semantics else {}
        for column, mine, reference in zip(header, our_row, their_row):
            if column in skip:
                continue
            if column in own:
                assert mine == own[column], (our_row[0], column)
            elif isinstance(reference, (int, float)) and isinstance(mine, (int, float)):
                assert mine == pytest.approx(reference, abs=NUMERIC_TOLERANCE), (our_row[0], column)
            else:
                assert mine == reference, (our_row[0], column)


def test_tensor_mode_matches_reference_report(out_dir):
    outcome, (header, rows, fills) = _compare("pytorch_tensor_mix_run_a", "pytorch_tensor_mix_run_b", out_dir)
    ref_header, ref_rows, ref_fills = read_xlsx(sample_report("tensor_mode_compare_result.xlsx"))
    assert header == ref_header
    tensor_rows = [i for i, row in enumerate(ref_rows) if row[2] == "torch.float32"]
    assert len(tensor_rows) == 103
    messages = header.index("Err_message")
    for i in tensor_rows:  # highlight reasons are the same set (the reference repeats a reason per input)
        assert set((rows[i][messages] or "").split("\n")) == set((ref_rows[i][messages] or "").split("\n"))
        rows[i][messages] = ref_rows[i][messages]
    _assert_cells_equal(header, rows, ref_rows, own_semantics=_own_semantics)
    assert fills == ref_fills


def test_tensor_mode_advisor_points_at_first_failing_row(out_dir):
    outcome, _ = _compare("pytorch_tensor_mix_run_a", "pytorch_tensor_mix_run_b", out_dir)
    with open(outcome.advisor_path) as handle:
        ours = handle.read().splitlines()
    with open(sample_report("tensor_mode_advisor.txt")) as handle:
        reference = handle.read().splitlines()
    assert ours[:2] == reference[:2] == ["Line: 0", "Suspect Nodes: Functional.linear.0.forward.input.0"]


def test_md5_mode_reports_crc_per_row(out_dir):
    _, (header, rows, _) = _compare("pytorch_md5_L1", "pytorch_md5_L1", out_dir)
    ref_header, ref_rows, _ = read_xlsx(sample_report("md5_mode_compare_result.xlsx"))
    assert header == ref_header
    # the sample's bench side is another run; its NPU side is this dump
    _assert_cells_equal(header, rows, ref_rows, skip={"BENCH MD5", "Result"},
                        own_semantics=lambda h, row: _own_semantics(h, row) if row[0] == MEMORY_FORMAT_ROW else {})
    assert {row[header.index("Result")] for row in rows} == {"pass"}


def test_statistics_mode_layout_matches_reference_report(out_dir):
    _, (header, rows, fills) = _compare("pytorch_statistics_mix", "pytorch_statistics_mix", out_dir)
    ref_header, ref_rows, _ = read_xlsx(sample_report("statistics_mode_compare_result.xlsx"))
    assert header == ref_header
    # the sample report compares another step of the same model with itself: same rows, zero diffs
    names = {c: header.index(c) for c in ("NPU Name", "NPU Tensor Shape", "Max diff", "MaxRelativeErr", "Result")}
    assert [r[0] for r in rows] == [r[0] for r in ref_rows]
    assert [r[names["NPU Tensor Shape"]] for r in rows] == [r[names["NPU Tensor Shape"]] for r in ref_rows]
    assert [r[names["Max diff"]] for r in rows] == [r[names["Max diff"]] for r in ref_rows]
    assert [r[names["MaxRelativeErr"]] for r in rows] == [r[names["MaxRelativeErr"]] for r in ref_rows]
    assert [r[names["Result"]] for r in rows] == [r[names["Result"]] for r in ref_rows]
    assert set(fills) == {None}


def test_statistics_mode_between_two_runs_flags_warnings(out_dir):
    """Tensor dumps carry statistics too; compared as statistics (data_name dropped) they must diverge."""
    import json
    import os

    paths = []
    for run in ("pytorch_tensor_mix_run_a", "pytorch_tensor_mix_run_b"):
        with open(sample_dump(run)) as handle:
            dump = json.load(handle)
        dump["task"] = "statistics"
        text = json.dumps(dump).replace('"data_name"', '"_unused"')
        path = os.path.join(out_dir + "_in", run + ".json")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as handle:
            handle.write(text)
        paths.append(path)
    outcome = compare_dumps(paths[0], paths[1], out_dir, CompareOptions(timestamp="2", progress=False))[0]
    header, rows, fills = read_xlsx(outcome.xlsx_path)
    first = rows[0]
    assert first[header.index("Max diff")] == pytest.approx(2.0942611694335938 - 2.708244323730469, abs=1e-9)
    relative = abs(2.0942611694335938 - 2.708244323730469) / 2.708244323730469
    assert first[header.index("MaxRelativeErr")] == f"{round(relative * 100, 6)}%"
    assert "Warning" in [r[header.index("Result")] for r in rows]
    assert any(RED_MESSAGES["relative"] in (r[header.index("Err_message")] or "") for r in rows)
