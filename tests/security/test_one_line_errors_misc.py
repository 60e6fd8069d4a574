"""Inputs that used to escape as tracebacks, now one [ERROR] line: merge_result on an xlsx without the
columns a compare result has."""
import openpyxl
import pytest

from msprobe.cli import main


@pytest.mark.parametrize("header", [["Name", "Max diff", "Min diff"], ["NPU Name", "Bench Name"]])
def test_merge_result_on_an_xlsx_without_compare_columns_is_one_line(tmp_path, capsys, header):
    folder = tmp_path / "in"
    folder.mkdir()
    book = openpyxl.Workbook()
    book.active.append(header)
    book.active.append(["Distributed.all_reduce.0.forward.input.0", 1.0, 2.0][:len(header)])
    book.save(folder / "compare_result_rank0-rank0_20250101000000.xlsx")
    config = tmp_path / "merge.yaml"
    config.write_text("api:\n- Distributed.all_reduce\n")
    code = main(["-f", "pytorch", "merge_result", "-i", str(folder), "-o", str(tmp_path / "o"), "-config", str(config)])
    out = capsys.readouterr().out
    errors = [line for line in out.splitlines() if line.startswith("[ERROR]")]
    assert code == 1 and len(errors) == 1 and "Traceback" not in out and "unexpected" not in out, out
    assert "has no column" in errors[0] and "compare_result_rank0-rank0" in errors[0]
