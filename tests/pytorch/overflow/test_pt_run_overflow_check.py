"""`msprobe -f pytorch run_overflow_check` on real overflow dumps of an fp16 model."""
import csv
import json

import torch

from msprobe.cli import main
from msprobe.pytorch import PrecisionDebugger

X = torch.tensor([1.0, 3.0, 7.0], dtype=torch.float16)


def _dump(tmp_path, task="overflow_check"):
    config = tmp_path / "c.json"
    section = {"overflow_nums": -1} if task == "overflow_check" else {}
    config.write_text(json.dumps({"task": task, "dump_path": str(tmp_path / "d"), "level": "L1", task: section}))
    debugger = PrecisionDebugger(config_path=str(config))
    debugger.start()
    h = X * 2
    big = torch.exp(h)          # overflows in fp16 (exp(14) > 65504), finite in float32
    _ = big - big               # fed inf: not re-run
    debugger.stop()
    debugger.close()
    return tmp_path / "d" / "step0" / "rank" / "dump.json"


def _report(tmp_path, capsys, dump_json):
    code = main(["-f", "pytorch", "run_overflow_check", "-api_info", str(dump_json), "-o", str(tmp_path / "r")])
    out = capsys.readouterr().out
    files = list((tmp_path / "r").glob("run_overflow_check_result_*.csv"))
    assert code == 0 and len(files) == 1
    with open(files[0], newline="") as handle:
        return out, list(csv.DictReader(handle))


def test_real_overflow_dump_gives_a_normal_overflow(tmp_path, capsys):
    out, rows = _report(tmp_path, capsys, _dump(tmp_path))
    assert "The Torch.exp.0.forward overflow is a normal overflow." in out
    exp = rows[0]
    assert (exp["api_name"], exp["inputs"], exp["cpu_same_dtype_overflow"], exp["cpu_fp32_overflow"],
            exp["verdict"]) == ("Torch.exp.0.forward", "real", "True", "False", "normal")
    assert rows[1]["api_name"] == "Tensor.__sub__.0.forward" and rows[1]["verdict"] == "skipped"


def test_an_overflow_the_cpu_does_not_reproduce_is_abnormal(tmp_path, capsys):
    dump_json = _dump(tmp_path)
    # as if the device's exp had overflowed on inputs a CPU exp handles: the saved input is small
    saved = dump_json.parent / "dump_tensor_data" / "Torch.exp.0.forward.input.0.pt"
    torch.save(torch.tensor([1.0, 2.0, 3.0], dtype=torch.float16), saved)
    out, rows = _report(tmp_path, capsys, dump_json)
    assert "The Torch.exp.0.forward overflow is an abnormal overflow." in out
    assert rows[0]["verdict"] == "abnormal" and rows[0]["cpu_same_dtype_overflow"] == "False"


def test_statistics_dump_uses_generated_inputs(tmp_path, capsys):
    out, rows = _report(tmp_path, capsys, _dump(tmp_path, task="statistics"))
    exp = [r for r in rows if r["api_name"] == "Torch.exp.0.forward"][0]
    assert exp["inputs"] == "generated" and exp["verdict"] == "normal"  # values drawn up to Max=14 overflow


def test_missing_dump_is_one_error_line(tmp_path, capsys):
    code = main(["-f", "pytorch", "run_overflow_check", "-api_info", str(tmp_path / "none.json")])
    assert code == 1
    err = capsys.readouterr()
    assert "[ERROR]" in err.out + err.err and "Traceback" not in err.out + err.err
