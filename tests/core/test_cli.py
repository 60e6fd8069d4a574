"""The msprobe CLI dispatcher: help, version, lazy imports, clear errors."""
import os
import subprocess
import sys

import msprobe.cli
from msprobe import __version__
from msprobe.cli import FRAMEWORKS, SUBCOMMANDS, available_commands, main


def _run(*args, env=None):
    return subprocess.run([sys.executable, "-m", "msprobe.cli", *args], capture_output=True, text=True, env=env)


def test_help_and_version():
    result = _run("-h")
    assert result.returncode == 0 and "compare" in result.stdout and "run_ut" in result.stdout
    result = _run("--version")
    assert result.returncode == 0 and __version__ in result.stdout


def test_help_lists_exactly_the_command_files_of_each_framework():
    root = os.path.dirname(os.path.abspath(msprobe.cli.__file__))
    result = _run("-h")
    def command_files(package):
        return {name[:-3] for name in os.listdir(os.path.join(root, package, "commands"))
                if name.endswith(".py") and not name.startswith("_")}

    shared = command_files("core")  # framework-free commands, offered for every framework
    assert "config" in shared
    for framework in FRAMEWORKS:
        files = sorted(command_files(framework) | shared)
        assert list(available_commands(framework)) == files
        line = next(line for line in result.stdout.splitlines() if line.strip().startswith(framework))
        assert line.split(None, 1)[1].split(", ") == files
    assert set(SUBCOMMANDS) == set(available_commands("pytorch")) | set(available_commands("mindspore"))


def test_no_text_promises_work_that_is_not_there():
    root = os.path.dirname(os.path.abspath(msprobe.cli.__file__))
    for folder, _, names in os.walk(root):
        for name in names:
            if name.endswith((".py", ".json", ".yaml")):
                with open(os.path.join(folder, name), encoding="utf-8") as handle:
                    assert "not implemented yet" not in handle.read(), name


def test_a_command_of_the_other_framework_only_is_one_line(capsys):
    only_pytorch = sorted(set(available_commands("pytorch")) - set(available_commands("mindspore")))
    assert only_pytorch, "every command exists for both frameworks: pick another check"
    assert main(["-f", "mindspore", only_pytorch[0]]) == 1
    out = capsys.readouterr().out
    assert "[ERROR]" in out and "not available for mindspore" in out and len(out.strip().splitlines()) == 1


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


def test_a_bug_escaping_a_command_is_one_line_marked_unexpected(tmp_path, capsys, monkeypatch):
    from msprobe.pytorch.commands import op_generate

    def broken_run(args):
        raise TypeError("unsupported operand type(s)\nsecond line")

    monkeypatch.setattr(op_generate, "run", broken_run)
    argv = ["-f", "pytorch", "op_generate", "-i", "c.json", "-o", str(tmp_path)]
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert out.count("[ERROR]") == 1 and "unexpected TypeError" in out and len(out.strip().splitlines()) == 1
    monkeypatch.setenv("MSPROBE_LOG_LEVEL", "0")
    assert main(argv) == 1
    assert "Traceback" in capsys.readouterr().out


def test_errors_show_the_traceback_at_log_level_0(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("MSPROBE_LOG_LEVEL", "0")
    assert main(["-f", "pytorch", "compare", "-i", str(tmp_path / "missing.json"), "-o", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "[ERROR]" in out and "Traceback" in out
