"""api_precision_compare's files: new output folders are 0750 all the way down, reports 0640."""
import csv
import os
import stat

from msprobe.cli import main
from msprobe.core.precision.columns import DETAIL_COLUMNS


def _details_csv(path):
    row = {title: "" for title in DETAIL_COLUMNS}
    row.update({"API name": "Functional.relu.0.forward.output.0", "Bench Dtype": "torch.float32",
                "DEVICE Dtype": "torch.float32", "Shape": "(2,)", "二进制一致错误率": "0.0", "Status": "pass"})
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, DETAIL_COLUMNS)
        writer.writeheader()
        writer.writerow(row)
    return str(path)


def test_output_parents_are_0750_and_reports_0640(tmp_path):
    details = _details_csv(tmp_path / "accuracy_checking_details_1.csv")
    out = tmp_path / "a" / "b" / "c"
    old = os.umask(0o022)
    try:
        assert main(["-f", "pytorch", "api_precision_compare", "-npu", details, "-gpu", details, "-o", str(out)]) == 0
    finally:
        os.umask(old)
    folders = [tmp_path / "a", tmp_path / "a" / "b", out]
    assert [oct(stat.S_IMODE(p.stat().st_mode)) for p in folders] == ["0o750"] * 3
    reports = sorted(out.iterdir())
    assert len(reports) == 2 and all(stat.S_IMODE(p.stat().st_mode) == 0o640 for p in reports)
    with open(next(p for p in reports if "result" in p.name), encoding="utf-8") as handle:
        assert list(csv.reader(handle))[1][:2] == ["Functional.relu.0", "pass"]
