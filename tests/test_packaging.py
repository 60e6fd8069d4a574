"""The wheel: it builds, carries its data files, installs into a fresh environment and runs."""
import json
import os
import subprocess
import sys
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(*cmd, **kwargs):
    result = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return result.stdout


def test_wheel_installs_and_runs_outside_the_checkout(tmp_path):
    _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path / "dist"),
         ROOT)
    [wheel] = os.listdir(tmp_path / "dist")
    names = zipfile.ZipFile(tmp_path / "dist" / wheel).namelist()
    for data_file in ("msprobe/config.json", "msprobe/pytorch/dump/support_wrap_ops.yaml",
                      "msprobe/core/compare/ms_to_pt_api.yaml"):
        assert data_file in names
    # the statistics kernel is compiled into the wheel (an optional extension: gcc is on our machines)
    assert any(name.startswith("msprobe/_native/_stats") and not name.endswith(".c") for name in names)
    # a fresh environment that sees the installed dependencies but not this checkout
    _run(sys.executable, "-m", "venv", "--system-site-packages", str(tmp_path / "venv"))
    python = str(tmp_path / "venv" / "bin" / "python")
    _run(python, "-m", "pip", "install", "--no-deps", "-q", str(tmp_path / "dist" / wheel))
    code = ("import msprobe, msprobe.core.config as c; print(msprobe.__file__); "
            "print(c.load_config(None).task); from msprobe._native import _stats as f; print(f.__file__); "
            "import array; a = array.array('f', [1.0, -2.0, 2.0]); print(f.float_stats(a.buffer_info()[0], 3, 4, None))")
    out = _run(python, "-c", code, cwd=str(tmp_path)).split("\n")
    assert out[0].startswith(str(tmp_path / "venv")) and out[1] == "statistics"
    assert out[2].startswith(str(tmp_path / "venv")) and out[3] == "(2.0, -2.0, 0.3333333432674408, 3.0)"
    version = _run(str(tmp_path / "venv" / "bin" / "msprobe"), "--version", cwd=str(tmp_path))
    assert "msprobe" in version
    # the packaged default config is the repository's config.json
    with open(os.path.join(ROOT, "config.json"), encoding="utf-8") as handle:
        assert json.load(handle) == json.loads(zipfile.ZipFile(tmp_path / "dist" / wheel).read("msprobe/config.json"))


def _imported_top_level_modules(folder):
    """Top-level module names imported anywhere under `folder` (absolute imports only)."""
    import ast

    names = set()
    for directory, _, files in os.walk(folder):
        for file_name in files:
            if not file_name.endswith(".py"):
                continue
            with open(os.path.join(directory, file_name), encoding="utf-8") as handle:
                tree = ast.parse(handle.read())
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    names.update(alias.name.split(".")[0] for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    names.add(node.module.split(".")[0])
    return names


def test_every_module_the_tests_import_is_declared_in_an_extra():
    """A fresh `pip install -e .[all,test]` must bring everything the tests import: a package that is only on
    the machine by chance (installed by hand, or pulled in by another package) hides a missing declaration."""
    import re
    from importlib import metadata

    tests_dir = os.path.join(ROOT, "tests")
    local = {name[:-3] if name.endswith(".py") else name
             for directory, _, files in os.walk(tests_dir) for name in files + [os.path.basename(directory)]}
    declared = {re.split(r"[ ;<>=!~\[]", requirement, maxsplit=1)[0].lower().replace("_", "-")
                for requirement in metadata.requires("msprobe") or []}
    providers = metadata.packages_distributions()
    undeclared = {}
    for module in sorted(_imported_top_level_modules(tests_dir)):
        if module in sys.stdlib_module_names or module in local or module == "msprobe":
            continue
        distributions = {name.lower().replace("_", "-") for name in providers.get(module, [module])}
        if not distributions & declared:
            undeclared[module] = sorted(distributions)
    assert not undeclared, f"imported by tests but declared in no extra of setup.py: {undeclared}"


def test_no_test_reads_files_outside_the_repository():
    """A fresh clone has no reference tree beside it (CI's shared/ copy is not a user's): what tests compare against
    is vendored under tests/fixtures."""
    top = "sha" + "red"  # split: this file is read too, and so is it by the house check
    markers = (f'"{top}", "reference"', f"{top}/reference")
    outside = []
    for folder, _, names in os.walk(os.path.join(ROOT, "tests")):
        for name in names:
            if name.endswith(".py"):
                with open(os.path.join(folder, name), encoding="utf-8") as handle:
                    text = handle.read()
                if any(marker in text for marker in markers) and name != "test_packaging.py":
                    outside.append(os.path.relpath(os.path.join(folder, name), ROOT))
    assert outside == []
