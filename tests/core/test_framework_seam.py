"""The seam between core and the frameworks: core imports no adapter (not even by a module path in a
string), `get_framework` finds both adapters by name and refuses others in one line, and the rank has one
definition."""
import ast
import os
import subprocess
import sys

import pytest

import msprobe
from msprobe.core.errors import UnsupportedError
from msprobe.core.framework import Framework, available_frameworks, current_rank, get_framework

PACKAGE_DIR = os.path.dirname(os.path.abspath(msprobe.__file__))
CORE_DIR = os.path.join(PACKAGE_DIR, "core")
ADAPTERS = tuple(f"msprobe.{name}" for name in available_frameworks())  # every adapter package, found


def _python_files(root):
    for folder, _, names in os.walk(root):
        for name in sorted(names):
            if name.endswith(".py"):
                yield os.path.join(folder, name)


def _docstring_nodes(tree):
    """The docstring expressions of the module, its classes and functions (prose, not code)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                found.add(id(first.value))
    return found


def _mentions_adapter(text):
    text = text.replace("/", ".")
    return any(adapter in text for adapter in ADAPTERS)


def adapter_references(source, module_name):
    """[(line, what)] of every import of an adapter package and every code string naming one."""
    tree = ast.parse(source)
    package = module_name.rsplit(".", 1)[0]
    prose = _docstring_nodes(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names if _mentions_adapter(alias.name + ".")]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against this module's package
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
            found += [(node.lineno, name) for name in names if _mentions_adapter(name + ".")]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose:
            if _mentions_adapter(node.value):
                found.append((node.lineno, repr(node.value)))
    return found


def test_core_imports_no_adapter_directly_or_by_module_path_string():
    offenders = []
    for path in _python_files(CORE_DIR):
        module = "msprobe." + os.path.relpath(path, PACKAGE_DIR)[:-3].replace(os.sep, ".")
        with open(path, encoding="utf-8") as handle:
            offenders += [f"{os.path.relpath(path, PACKAGE_DIR)}:{line}: {what}"
                          for line, what in adapter_references(handle.read(), module)]
    assert offenders == []


def test_adapters_import_no_other_adapter():
    """What two adapters share lives in core; a framework's package never imports the other's (the CLI finds
    framework-free commands in core/commands for every framework)."""
    offenders = []
    for adapter in ADAPTERS:
        root = os.path.join(PACKAGE_DIR, adapter.split(".", 1)[1])
        others = tuple(other for other in ADAPTERS if other != adapter)
        for path in _python_files(root):
            module = "msprobe." + os.path.relpath(path, PACKAGE_DIR)[:-3].replace(os.sep, ".")
            with open(path, encoding="utf-8") as handle:
                offenders += [f"{os.path.relpath(path, PACKAGE_DIR)}:{line}: {what}"
                              for line, what in adapter_references(handle.read(), module)
                              if any(other in what.replace("/", ".") for other in others)]
    assert offenders == []


@pytest.mark.parametrize("source", [
    "import msprobe.pytorch.dump.adapter",
    "from msprobe.mindspore.dump.kernel_files import kernel_files",
    "from msprobe import pytorch",
    "from ....mindspore.compare import ms_to_pt",
    "PACKERS = {'pytorch': 'msprobe.pytorch.online_run_ut.packing'}",
    "importlib.import_module(f'msprobe.mindspore.{name}')",
    "def f():\n    '''doc'''\n    return 'msprobe/pytorch/free_benchmark/perturb.py'",
])
def test_the_scan_finds_each_kind_of_adapter_reference(source):
    assert adapter_references(source, "msprobe.core.dump.tasks.example") != []


def test_the_scan_leaves_docstrings_and_other_names_alone():
    source = '"""Uses msprobe.pytorch.monitor as an example."""\nFRAMEWORKS = ("pytorch", "mindspore")\n'
    assert adapter_references(source, "msprobe.core.example") == []


def test_get_framework_finds_both_adapters_by_name():
    assert available_frameworks() == ("mindspore", "pytorch")
    for name in ("pytorch", "mindspore"):
        framework = get_framework(name)
        assert isinstance(framework, Framework) and framework.name == name
        assert get_framework(name) is framework  # one instance per adapter
        assert framework.dump_adapter().framework == name
    assert get_framework("pytorch").perturbation_ops().__name__ == "TorchFuzzOps"
    assert get_framework("mindspore").perturbation_ops().__name__ == "MindSporeFuzzOps"
    assert get_framework("pytorch").wire_packer().__name__ == "pack_tensor"
    assert get_framework("mindspore").wire_packer() is None  # online run_ut is PyTorch only


@pytest.mark.parametrize("name", ["tensorflow", "core", "visualization", "../pytorch", ""])
def test_get_framework_refuses_an_unknown_name_in_one_line(name):
    with pytest.raises(UnsupportedError) as caught:
        get_framework(name)
    message = str(caught.value)
    assert "\n" not in message and repr(name) in message and "mindspore, pytorch" in message


def test_finding_a_framework_imports_neither_torch_nor_mindspore():
    code = ("import sys; from msprobe.core.framework import get_framework; "
            "[get_framework(n) for n in ('pytorch', 'mindspore')]; "
            "print(sorted(m for m in ('torch', 'mindspore') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]"


def test_current_rank_reads_the_launcher_variables_of_the_framework_only(monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.setenv("RANK_ID", "3")  # msrun's variable, the communication not initialised
    assert current_rank(get_framework("mindspore")) == 3
    assert current_rank(get_framework("pytorch")) is None  # torch: the process group's rank only
    assert current_rank(get_framework("pytorch"), default=0) == 0
    monkeypatch.setenv("RANK_ID", "not a number")
    assert current_rank(get_framework("mindspore"), default=0) == 0


def test_current_rank_is_defined_once():
    definitions = []
    for path in _python_files(PACKAGE_DIR):
        with open(path, encoding="utf-8") as handle:
            tree = ast.parse(handle.read())
        definitions += [os.path.relpath(path, PACKAGE_DIR) for node in ast.walk(tree)
                        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                        and node.name == "current_rank"]
    assert definitions == ["core/framework.py"]
