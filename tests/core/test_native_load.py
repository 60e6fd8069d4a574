"""The statistics kernel: a build that does not load is said, not silently dropped."""
import subprocess
import sys

_BROKEN_BUILD = """
import importlib.abc, sys

class Broken(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "msprobe.core.dump._fast_stats":
            raise ImportError("undefined symbol: Py_NewRef")
        return None

sys.meta_path.insert(0, Broken())
import msprobe.core.dump.native as native
print("kernel", native.float_stats is None)
"""


def _run(code):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_a_build_that_does_not_load_is_reported_and_the_framework_path_serves():
    done = _run(_BROKEN_BUILD)
    assert done.returncode == 0, done.stderr
    assert "kernel True" in done.stdout
    assert "built but does not load" in done.stdout + done.stderr
    assert "Py_NewRef" in done.stdout + done.stderr


def test_the_built_kernel_loads_without_a_warning():
    done = _run("import msprobe.core.dump.native as native; print('kernel', native.float_stats is not None)")
    assert done.returncode == 0, done.stderr
    assert "kernel True" in done.stdout
    assert "does not load" not in done.stdout + done.stderr
