"""op_generate with hostile config_op.json / extract files: nothing from a file ever becomes code."""
import ast
import json
import os
import subprocess
import sys

import pytest
from pt_run_ut_helpers import run_cli

_TENSOR = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [4], "Max": 1.0, "Min": -1.0, "Mean": 0.0,
           "Norm": 1.0, "requires_grad": False}


def _extract_file(tmp_path, key, record=None):
    path = tmp_path / "extracted.json"
    record = record or {"input_args": [_TENSOR], "input_kwargs": {}, "output": [_TENSOR]}
    path.write_text(json.dumps({"task": "statistics", "framework": "pytorch", "dump_json_path": "",
                                "data": {key: record}}))
    config = tmp_path / "config_op.json"
    config.write_text(json.dumps({"extract_api_path": str(path)}))
    return config


def _one_error_line(out):
    errors = [line for line in out.splitlines() if line.startswith("[ERROR]")]
    return len(errors) == 1 and "Traceback" not in out


@pytest.mark.parametrize("key", [
    # broke out of `API_NAME = "..."` in the generated script and ran a command (issue 11)
    'Functional.x";import os;os.system("touch PWNED");"y.0.forward',
    'Functional.relu(__import__("os").system("touch PWNED")) or torch.nn.functional.relu.0.forward',
    "Functional.relu\nimport os\nos.system('touch PWNED')\n#.0.forward",
    "Functional.a/../../evil.0.forward",
    "Functional.relu.0\n.forward",
])
def test_crafted_entry_names_are_rejected_and_nothing_runs(tmp_path, capsys, monkeypatch, key):
    monkeypatch.chdir(tmp_path)
    out_dir = tmp_path / "ops"
    assert run_cli("op_generate", "-i", str(_extract_file(tmp_path, key)), "-o", str(out_dir)) == 1
    out = capsys.readouterr().out
    assert _one_error_line(out) and "is not an API name" in out
    assert not out_dir.exists() or list(out_dir.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config_op.json", "extracted.json"]


def test_hostile_text_inside_records_stays_data_when_the_script_runs(tmp_path, capsys):
    payload = '"""+__import__("os").system("touch PWNED")+r"""\\'
    record = {"input_args": [_TENSOR], "input_kwargs": {}, "output": [_TENSOR], "note": payload}
    out_dir = tmp_path / "ops"
    assert run_cli("op_generate", "-i", str(_extract_file(tmp_path, "Functional.relu.0.forward", record)),
                   "-o", str(out_dir)) == 0
    script = out_dir / "Functional.relu.0.forward.py"
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=str(tmp_path),
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert "Functional.relu.0 forward: pass" in result.stdout
    assert not (tmp_path / "PWNED").exists()
    forward = next(node.value for node in ast.parse(script.read_text()).body
                   if isinstance(node, ast.Assign) and node.targets[0].id == "FORWARD")
    assert json.loads(forward.args[0].value)["note"] == payload  # kept as data, byte for byte


def _unwritable_dir(tmp_path):
    """A folder nobody may create files in: /sys refuses even root, others get a 0500 folder."""
    if os.geteuid() == 0:
        return "/sys/msprobe_no_write"
    folder = tmp_path / "read_only"
    folder.mkdir(mode=0o500)
    return str(folder / "ops")


def test_unwritable_output_folder_is_one_line(tmp_path, capsys):
    config = _extract_file(tmp_path, "Functional.relu.0.forward")
    assert run_cli("op_generate", "-i", str(config), "-o", _unwritable_dir(tmp_path)) == 1
    out = capsys.readouterr().out
    assert _one_error_line(out) and "cannot" in out


@pytest.mark.parametrize("raw", [
    {"extract_api_path": ["a"]}, {"extract_api_path": "x.json", "api_name": 3},
    {"extract_api_path": "x.json", "dump_json_path": "d.json", "api_name": "Functional.x\n.0"},
])
def test_wrong_types_in_config_op_are_one_line(tmp_path, capsys, raw):
    config = tmp_path / "config_op.json"
    config.write_text(json.dumps(raw))
    assert run_cli("op_generate", "-i", str(config), "-o", str(tmp_path / "ops")) == 1
    assert _one_error_line(capsys.readouterr().out)


@pytest.mark.parametrize("content", ['{"data": []}', '[1, 2]', '{"data": {"Functional.relu.0.forward": 5}}',
                                     '{"data": {"Functional.relu.0.forward": {}}, "task": "tensor", '
                                     '"dump_json_path": 7}'])
def test_wrong_shapes_of_extract_file_are_one_line(tmp_path, capsys, content):
    path = tmp_path / "extracted.json"
    path.write_text(content)
    config = tmp_path / "config_op.json"
    config.write_text(json.dumps({"extract_api_path": str(path), "data_mode": "real_data"}))
    assert run_cli("op_generate", "-i", str(config), "-o", str(tmp_path / "ops")) == 1
    assert _one_error_line(capsys.readouterr().out)
