"""README's first command ends in examples/demo.py: two real runs dumped, compared, the bug named."""
import os
import subprocess
import sys

import openpyxl

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _demo(out, *extra):
    result = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "demo.py"), "--out", str(out), *extra],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return result


def test_demo_names_the_wrong_gelu_constant_and_this_runs_reports(tmp_path):
    out = tmp_path / "demo"
    for _ in range(2):  # the second run must name only its own reports
        result = _demo(out)
    listed = [line.strip() for line in result.stdout.split("== done. Reports:")[1].splitlines() if line.strip()]
    assert len(listed) == 2 and all(os.path.isfile(path) for path in listed)
    assert len(os.listdir(out / "report")) == 4
    for dtype in ("fp32", "bf16"):
        assert (out / f"dump_{dtype}" / "step0" / "rank" / "dump.json").is_file()
        assert any((out / f"dump_{dtype}" / "step0" / "rank" / "dump_tensor_data").iterdir())
    advisor = open(next(path for path in listed if path.endswith(".txt"))).read()
    lines = advisor.splitlines()
    # the multiplication by the GELU constant (or the GELU module around it) is the cause, and why
    assert lines[1].startswith("Suspect Nodes: ") and ("mul" in lines[1] or "TanhGELU" in lines[1]), advisor
    assert "inputs agree" in lines[2] and "bf16 eps" in lines[2]
    assert "value differs: NPU 0.7, bench 0.797884" in advisor
    assert "All rows reached accuracy" not in advisor
    workbook = openpyxl.load_workbook(next(path for path in listed if path.endswith(".xlsx")))
    sheet = workbook.active
    rows = list(sheet.iter_rows(values_only=True))
    assert len(rows) > 10 and "NPU Name" in rows[0] and rows[0][-1] == "Suspicion"
    line = int(lines[0].split(": ")[1])
    assert rows[line + 1][0] == lines[1].split(": ")[1] and rows[line + 1][-1].startswith("Advisor's suspect")
    # the terminal summary comes after the progress bar and names the suspect
    assert "suspect: " + lines[1].split(": ")[1] in result.stdout


def test_demo_without_the_bug_names_no_suspect(tmp_path):
    result = _demo(tmp_path / "clean", "--no-bug", "--task", "statistics")
    assert "Suspect Nodes: N/A" in result.stdout and "No suspect found." in result.stdout
    assert " 0 red" in result.stdout
