"""overflow_check for MindSpore at L2 on CPU: the first kernels with inf/nan in a real native kernel dump."""
import json
import os
import subprocess
import sys

import numpy as np

from msprobe.core.overflow.kernel_overflow import REPORT_FILE, KernelOverflowFilter

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ms_l2_overflow_script.py")


def _kernel_dump(tmp_path):
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"task": "tensor", "dump_path": str(tmp_path / "d"), "level": "L2", "tensor": {}}))
    done = subprocess.run([sys.executable, SCRIPT, str(config)], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    return tmp_path / "d" / "rank_0" / "Net" / "0" / "0"


def _load(folder, prefix, io):
    (name,) = [n for n in os.listdir(folder) if n.startswith(prefix + ".") and f".{io}.0." in n]
    return np.load(folder / name)


def test_first_overflowing_kernel_is_kept_alone_and_named(tmp_path):
    folder = _kernel_dump(tmp_path)
    # independently: MindSpore's CPU Exp runs in float32 and is finite; the cast back to fp16 overflows
    assert np.isfinite(_load(folder, "Exp.Default_Exp-op0", "input")).all()
    assert np.isinf(_load(folder, "Cast.Default_Cast-op1", "output")).any()
    assert np.isfinite(_load(folder, "Cast.Default_Cast-op1", "input")).all()
    kept = KernelOverflowFilter(overflow_nums=1).finalize_directory(str(folder))
    assert kept == ["Cast.Default_Cast-op1"]
    remaining = sorted(n for n in os.listdir(folder) if n.endswith(".npy"))
    assert remaining and all(n.startswith("Cast.Default_Cast-op1.") for n in remaining)
    report = json.loads((folder / REPORT_FILE).read_text())
    assert report["first_producer"] == "Cast.Default_Cast-op1"
    assert report["kernels"][0]["role"] == "producer"


def test_unlimited_keeps_every_overflowing_kernel_producers_first(tmp_path):
    folder = _kernel_dump(tmp_path)
    kept = KernelOverflowFilter(overflow_nums=-1).finalize_directory(str(folder))
    assert kept[0] == "Cast.Default_Cast-op1" and "Sub.Default_Sub-op0" in kept
    assert not any(name.startswith(("MatMul", "Exp", "Parameter")) for name in kept)
    report = json.loads((folder / REPORT_FILE).read_text())
    roles = [k["role"] for k in report["kernels"]]
    assert roles == sorted(roles, key=lambda role: role != "producer")
    assert {k["kernel"]: k["role"] for k in report["kernels"]}["Sub.Default_Sub-op0"] == "propagator"


def test_overflow_check_task_at_l2_keeps_only_the_first_producer(tmp_path):
    """The whole path through PrecisionDebugger(task overflow_check, level L2) on MindSpore's CPU backend."""
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"task": "overflow_check", "dump_path": str(tmp_path / "d"), "level": "L2",
                                  "overflow_check": {"overflow_nums": 1}}))
    done = subprocess.run([sys.executable, SCRIPT, str(config)], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    folder = tmp_path / "d" / "rank_0" / "Net" / "0" / "0"
    remaining = sorted(n for n in os.listdir(folder) if n.endswith(".npy"))
    assert remaining and all(n.startswith("Cast.Default_Cast-op1.") for n in remaining)
    assert json.loads((folder / REPORT_FILE).read_text())["first_producer"] == "Cast.Default_Cast-op1"
    assert "first produced by kernel Cast.Default_Cast-op1" in done.stdout + done.stderr
