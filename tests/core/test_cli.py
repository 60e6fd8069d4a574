"""The msprobe CLI dispatcher: help, version, lazy imports, clear errors."""
import subprocess
import sys

from msprobe import __version__
from msprobe.cli import SUBCOMMANDS, main


def _run(*args, env=None):
    return subprocess.run([sys.executable, "-m", "msprobe.cli", *args], capture_output=True, text=True, env=env)


def test_help_and_version():
    result = _run("-h")
    assert result.returncode == 0 and "compare" in result.stdout and "run_ut" in result.stdout
    result = _run("--version")
    assert result.returncode == 0 and __version__ in result.stdout


def test_all_reference_subcommands_are_registered():
    for name in ("compare", "run_ut", "multi_run_ut", "api_precision_compare", "run_overflow_check", "parse",
                 "graph", "op_generate", "merge_result", "code_mapping"):
        assert name in SUBCOMMANDS


def test_unknown_framework_or_subcommand_is_a_usage_error():
    assert _run("-f", "jax", "compare").returncode == 2
    assert _run("-f", "pytorch", "frobnicate").returncode == 2


def test_importing_cli_and_core_does_not_import_frameworks():
    code = ("import sys, msprobe.cli, msprobe.core.config, msprobe.core.paths, msprobe.core.naming;"
            "import msprobe.core.compare, msprobe.core.dump;"
            "print(any(m in sys.modules for m in ('torch', 'mindspore')))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_errors_are_one_line_without_traceback(tmp_path, capsys):
    missing = str(tmp_path / "missing.json")
    code = main(["-f", "pytorch", "compare", "-i", missing, "-o", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 1 and "[ERROR]" in out and "Traceback" not in out
