"""`msprobe -f pytorch bisect` on real bf16 models where known modules break: it names exactly them."""
import json
import os
import subprocess
import sys

import pytest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bisect_targets.py")


def _bisect(tmp_path, culprits, *extra):
    env = dict(os.environ, BISECT_CULPRITS=",".join(culprits))
    done = subprocess.run([sys.executable, "-m", "msprobe.cli", "-f", "pytorch", "bisect", "--script", SCRIPT,
                           "-o", str(tmp_path / "out"), *extra], capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    with open(tmp_path / "out" / "bisect_result.json") as handle:
        return json.load(handle), done.stdout


@pytest.mark.parametrize("culprits", [["blocks.3.shift"], ["blocks.1.shift", "blocks.4.shift"]])
def test_the_modules_that_break_in_bf16_are_found_and_only_they(tmp_path, culprits):
    # bf16 rounding elsewhere moves the metric by ~3e-4; one broken block alone by 9e-3 or more
    result, out = _bisect(tmp_path, culprits, "--tolerance", "0.003")
    assert sorted(result["culprits"]) == culprits
    reference = result["metric_all_float32"]
    assert abs(result["metric_as_is"] - reference) > result["tolerance"]
    assert abs(result["metric_with_culprits_upcast"] - reference) <= result["tolerance"]
    # every trial is recorded with its modules and metric; a 6-block model needs far fewer than all subsets
    assert 4 <= len(result["trials"]) <= 40
    assert all(set(t) == {"modules", "metric", "good"} for t in result["trials"])
    for name in culprits:
        assert f"culprit: {name}" in out


def test_a_clean_model_is_reported_as_not_a_precision_problem(tmp_path):
    result, out = _bisect(tmp_path, [], "--tolerance", "0.003")
    assert result["culprits"] == [] and "does not explain" in result["conclusion"]
    assert len(result["trials"]) == 2


def test_a_script_without_bisect_target_is_one_error_line(tmp_path):
    script = tmp_path / "empty.py"
    script.write_text("x = 1\n")
    done = subprocess.run([sys.executable, "-m", "msprobe.cli", "-f", "pytorch", "bisect", "--script", str(script),
                           "-o", str(tmp_path / "out")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert len(lines) == 1 and "bisect_target" in lines[0]


def test_upcast_casts_back_to_the_incoming_dtype_and_leaves_other_modules_alone():
    import torch

    sys.path.insert(0, os.path.dirname(SCRIPT))
    from bisect_targets import bisect_target

    from msprobe.pytorch.bisect import upcast_modules

    model, _ = bisect_target()
    upcast_modules(model, frozenset(["blocks.2"]))
    seen = {}

    def record(name, with_input):
        def hook(_module, args, output):
            seen[name] = (args[0].dtype, output.dtype) if with_input else output.dtype
        return hook

    model.blocks[2].fc.register_forward_hook(record("inside", False))
    model.blocks[3].register_forward_hook(record("next", True))
    model(torch.randn(2, 8).bfloat16())
    assert model.blocks[2].fc.weight.dtype == torch.float32 and model.blocks[1].fc.weight.dtype == torch.bfloat16
    assert seen == {"inside": torch.float32, "next": (torch.bfloat16, torch.bfloat16)}
