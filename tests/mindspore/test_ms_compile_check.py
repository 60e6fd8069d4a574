"""MindSpore compile_check: each sub-cell in PyNative vs mindspore.jit on the same inputs, forward and
backward; a clean network departs nowhere, a jit that multiplies one Dense in float16 is named first."""
import json
import os
import subprocess
import sys

import mindspore as ms
import numpy as np
import pytest
from mindspore import Tensor
from ms_compile_models import LOW_PRECISION_CELL, low_precision_dense_jit
from ms_models import Net

from msprobe.core.compile_report import RESULT_FILE
from msprobe.mindspore.compile_check import compile_check

HERE = os.path.dirname(os.path.abspath(__file__))


def _inputs(dtype=ms.float32):
    return Tensor(np.random.RandomState(0).randn(6, 4).astype(np.float32)).astype(dtype)


@pytest.mark.parametrize("dtype", [ms.float32, ms.float16])
def test_clean_network_departs_nowhere_under_jit(tmp_path, dtype):
    ms.set_seed(0)
    net = Net()
    if dtype != ms.float32:
        net.to_float(dtype)
    report = compile_check(net, (_inputs(dtype),), output_path=str(tmp_path))
    assert report["first_departure"] is None, report["first_departure"]
    calls = {row["call"] for row in report["ranking"]}
    assert {"Cell.block.fc.Dense.forward.0", "Cell.block.Block.forward.0", "Cell.head.Dense.backward.0",
            "Cell.block.fc2.Linear.parameters_grad"} <= calls
    assert not any(row["beyond_tolerance"] for row in report["ranking"])


def test_low_precision_dense_is_named_first(tmp_path):
    ms.set_seed(0)
    net = Net()
    x = _inputs()
    report = compile_check(net, (x,), output_path=str(tmp_path), jit=low_precision_dense_jit)
    first = report["first_departure"]
    assert first["module"] == LOW_PRECISION_CELL and first["phase"] == "forward" and first["kind"] == "cause"
    assert first["call"] == "Cell.block.fc.Dense.forward.0"
    written = json.loads((tmp_path / RESULT_FILE).read_text())
    assert written["first_departure"] == first
    ranked = {row["call"]: row for row in written["ranking"]}
    assert ranked["Cell.block.fc.Dense.forward.0"]["beyond_tolerance"]
    assert not ranked["Cell.head.Dense.forward.0"]["beyond_tolerance"]
    # recomputed here: the PyNative output of block.fc against its float16 product
    eager = net.block.fc(x).asnumpy()
    half = (x.asnumpy().astype(np.float16) @ net.block.fc.weight.asnumpy().astype(np.float16).T).astype(np.float32)
    half = half + net.block.fc.bias.asnumpy()
    dump = json.loads((tmp_path / "dump_compiled" / "step0" / "rank" / "dump.json").read_text())
    out = dump["data"]["Cell.block.fc.Dense.forward.0"]["output"][0]
    assert out["Max"] == pytest.approx(float(half.max()), abs=1e-6) and out["Max"] != pytest.approx(float(eager.max()), abs=1e-7)


def test_cell_jit_cannot_compile_is_reported_and_the_others_checked(tmp_path, monkeypatch):
    from ms_compile_models import NetWithUncompilableCell

    monkeypatch.chdir(tmp_path)  # MindSpore writes rank_0/om/analyze_fail.ir into the working directory

    ms.set_seed(0)
    report = compile_check(NetWithUncompilableCell(), _inputs(), output_path=str(tmp_path))
    (skipped,) = report["not_compiled"]
    assert skipped["cell"] == "scaled" and skipped["class"] == "PidScaled" and "Import" in skipped["error"]
    calls = {row["call"] for row in report["ranking"]}
    assert {"Cell.fc.Dense.forward.0", "Cell.own.Scaled.forward.0"} <= calls
    assert not any("scaled" in call for call in calls)
    assert report["first_departure"] is None


def test_a_check_that_compiled_none_of_the_users_cells_fails(tmp_path, monkeypatch):
    from ms_compile_models import NetCompilingNothingOwn

    from msprobe.mindspore.compile_check import CompileCheckError

    monkeypatch.chdir(tmp_path)
    ms.set_seed(0)
    with pytest.raises(CompileCheckError, match="compiled nothing: none of the network's own cells ran under jit"):
        compile_check(NetCompilingNothingOwn(), _inputs(), output_path=str(tmp_path))


def _cli_on_net(tmp_path, module, net, shape, *options):
    """Run `msprobe -f mindspore compile_check` on a script whose compile_target() builds `module`.`net`()."""
    script = tmp_path / "target.py"
    script.write_text(
        "import sys\n"
        f"sys.path.insert(0, {HERE!r})\n"
        "import mindspore as ms\n"
        "import numpy as np\n"
        f"from {module} import {net}\n"
        "def compile_target():\n"
        "    ms.set_seed(0)\n"
        f"    return {net}(), (ms.Tensor(np.ones({shape!r}, np.float32)),)\n")
    return subprocess.run([sys.executable, "-m", "msprobe.cli", "-f", "mindspore", "compile_check", "--script",
                           str(script), *options, "-o", str(tmp_path / "out")], capture_output=True, text=True,
                          timeout=600, cwd=tmp_path)


def test_cli_runs_a_script_target(tmp_path):
    done = _cli_on_net(tmp_path, "ms_models", "Net", (2, 4), "--forward_only")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "no module departs beyond tolerance" in done.stdout
    report = json.loads((tmp_path / "out" / RESULT_FILE).read_text())
    assert report["ranking"] and not any("backward" in row["call"] for row in report["ranking"])


def test_cli_and_api_agree_on_a_script_defining_its_own_cells(tmp_path, monkeypatch):
    """The script's cells carry its module name; mindspore.jit's parser imports it: the CLI must compile them
    (it reported 'no module departs' having compiled none of them), and say what the API says."""
    import importlib.util

    monkeypatch.chdir(tmp_path)
    script = os.path.join(HERE, "ms_compile_target.py")
    done = subprocess.run([sys.executable, "-m", "msprobe.cli", "-f", "mindspore", "compile_check", "--script",
                           script, "-o", str(tmp_path / "cli")], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "not compiled" not in done.stdout
    cli = json.loads((tmp_path / "cli" / RESULT_FILE).read_text())
    spec = importlib.util.spec_from_file_location("ms_compile_target_api", script)
    target = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = target
    spec.loader.exec_module(target)
    api = compile_check(*target.compile_target(), output_path=str(tmp_path / "api"))
    assert cli["not_compiled"] == api["not_compiled"] == []
    assert {"Cell.blocks.0.attn.Attn.forward.0", "Cell.blocks.0.attn.Attn.backward.0",
            "Cell.blocks.1.Block.forward.0"} <= {row["call"] for row in cli["ranking"]}
    assert [(r["call"], r["beyond_tolerance"]) for r in cli["ranking"]] == \
        [(r["call"], r["beyond_tolerance"]) for r in api["ranking"]]
    assert cli["first_departure"] == api["first_departure"]


def test_cli_that_compiled_nothing_exits_non_zero_in_one_line(tmp_path):
    done = _cli_on_net(tmp_path, "ms_compile_models", "NetCompilingNothingOwn", (2, 4))
    assert done.returncode == 1
    errors = [line for line in (done.stdout + done.stderr).splitlines() if "compiled nothing" in line]
    assert len(errors) == 1 and errors[0].startswith("[ERROR]") and "Traceback" not in done.stderr
    assert "no module departs" not in done.stdout
