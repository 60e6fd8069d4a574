"""README's first command ends in examples/demo.py: two real runs dumped, compared, reports named."""
import os
import subprocess
import sys

import openpyxl

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_demo_dumps_two_runs_compares_them_and_names_this_runs_reports(tmp_path):
    out = tmp_path / "demo"
    for _ in range(2):  # the second run must name only its own reports
        result = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "demo.py"), "--out", str(out)],
                                capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    listed = [line.strip() for line in result.stdout.split("== done. Reports:")[1].splitlines() if line.strip()]
    assert len(listed) == 2 and all(os.path.isfile(path) for path in listed)
    assert len(os.listdir(out / "report")) == 4
    for dtype in ("fp32", "bf16"):
        assert (out / f"dump_{dtype}" / "step0" / "rank" / "dump.json").is_file()
        assert any((out / f"dump_{dtype}" / "step0" / "rank" / "dump_tensor_data").iterdir())
    workbook = openpyxl.load_workbook(next(path for path in listed if path.endswith(".xlsx")), read_only=True)
    rows = list(workbook.active.iter_rows(values_only=True))
    assert len(rows) > 10 and "NPU Name" in rows[0]
