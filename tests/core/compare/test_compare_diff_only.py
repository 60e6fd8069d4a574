"""diff_only keeps the rows that fail, warn, differ, are coloured or carry a Suspicion, and the terminal
summary of the suspicious rows still reads every row's Suspicion (it crashed with an IndexError once
rows were dropped)."""
import json
import os

from msprobe.core.compare import CompareOptions, compare_dumps

from compare_samples import read_xlsx, sample_dump


def _faulty_copy(tmp_path):
    """The statistics sample with the output of its first linear call scaled by 1.5: some rows differ."""
    with open(sample_dump("pytorch_statistics_mix")) as handle:
        dump = json.load(handle)
    output = dump["data"]["Functional.linear.0.forward"]["output"][0]
    for key in ("Max", "Min", "Mean", "Norm"):
        output[key] *= 1.5
    path = tmp_path / "npu" / "dump.json"
    os.makedirs(path.parent)
    path.write_text(json.dumps(dump))
    return str(path)


def _kept_by_rule(header, row, fill):
    """The documented diff_only rule, applied to a full report's row."""
    cell = dict(zip(header, row))
    return (fill is not None or cell["Result"] in ("Warning", "Different", "N/A")
            or (cell["Suspicion"] is not None and not cell["Suspicion"].startswith("within")))


def test_diff_only_report_holds_the_diff_rows_and_the_terminal_summary_runs(tmp_path, capsys):
    npu, bench = _faulty_copy(tmp_path), sample_dump("pytorch_statistics_mix")
    full = compare_dumps(npu, bench, str(tmp_path / "full"), CompareOptions(progress=False, timestamp="1"))[0]
    diff = compare_dumps(npu, bench, str(tmp_path / "diff"),
                         CompareOptions(progress=False, timestamp="1", diff_only=True, is_print_compare_log=True))[0]
    header, rows, fills = read_xlsx(full.xlsx_path)
    expected = [row for row, fill in zip(rows, fills) if _kept_by_rule(header, row, fill)]
    assert len(full.records.judgement.suspicious.nonzero()[0]) > 0  # the terminal table has rows to print
    assert 0 < len(expected) < len(rows)
    assert read_xlsx(diff.xlsx_path)[1] == expected
    assert "Functional.linear.0.forward.output.0" in capsys.readouterr().out
