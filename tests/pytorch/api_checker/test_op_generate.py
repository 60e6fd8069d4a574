"""op_generate writes a script that reruns one dumped API and prints the standard's verdict."""
import json
import re
import subprocess
import sys

from pt_run_ut_helpers import run_cli


def _generate(tmp_path, dump, api_name, propagation, data_mode):
    config = tmp_path / f"config_{propagation}_{data_mode}.json"
    config.write_text(json.dumps({"dump_json_path": dump, "api_name": api_name, "propagation": propagation,
                                  "extract_api_path": str(tmp_path / f"{api_name}.json"), "data_mode": data_mode,
                                  "random_seed": 7, "iter_times": 2}))
    assert run_cli("op_generate", "-i", str(config), "-o", str(tmp_path / "ops")) == 0
    script = tmp_path / "ops" / f"{api_name}.{propagation}.py"
    assert script.is_file()
    return script


def _run(script):
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)


def test_generated_forward_script_reproduces_the_api_with_random_data(bf16_statistics_dump, tmp_path):
    script = _generate(tmp_path, bf16_statistics_dump, "Functional.linear.0", "forward", "random_data")
    result = _run(script)
    assert result.returncode == 0, result.stderr
    assert "Compare Standard" in result.stdout and "ULP误差比对法" in result.stdout
    assert re.search(r"Dtype of out_device +: torch.bfloat16", result.stdout)
    assert result.stdout.count("iteration") == 2              # iter_times
    assert result.stdout.strip().endswith("Functional.linear.0 forward: pass")


def test_generated_backward_script_with_real_data_and_a_broken_edit(fp32_tensor_dump, tmp_path):
    script = _generate(tmp_path, fp32_tensor_dump, "Functional.gelu.0", "backward", "real_data")
    result = _run(script)
    assert result.returncode == 0, result.stderr
    assert "Functional.gelu.0.backward.output.0" in result.stdout and "Verdict" in result.stdout
    # the script is meant to be edited: a gelu that is 1% off in float32 (the device dtype; the bench
    # runs in float64) must now fail
    script = _generate(tmp_path, fp32_tensor_dump, "Functional.gelu.0", "forward", "real_data")
    assert _run(script).returncode == 0
    text = script.read_text().replace(
        "return torch.nn.functional.gelu(*args, **kwargs)",
        "out = torch.nn.functional.gelu(*args, **kwargs)\n    return out * 1.01 if out.dtype == torch.float32 else out")
    script.write_text(text)
    broken = _run(script)
    assert broken.returncode == 1 and "forward: error" in broken.stdout


def test_op_generate_reports_bad_configs(bf16_statistics_dump, tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"dump_json_path": bf16_statistics_dump, "api_name": "Functional.nothing.0",
                                  "extract_api_path": str(tmp_path / "x.json")}))
    assert run_cli("op_generate", "-i", str(config), "-o", str(tmp_path)) == 1
    config.write_text(json.dumps({"extract_api_path": str(tmp_path / "x.json"), "propagation": "sideways"}))
    assert run_cli("op_generate", "-i", str(config), "-o", str(tmp_path)) == 1
