"""msprobe._native: a build that does not load, or of another version, is said, not silently dropped; the Python
paths serve."""
import subprocess
import sys

_BROKEN_BUILD = """
import importlib.abc, sys

class Broken(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "msprobe._native._stats":
            raise ImportError("undefined symbol: Py_NewRef")
        return None

sys.meta_path.insert(0, Broken())
import msprobe.core.dump.native as native
print("kernel", native.float_stats is None)
"""


def _run(code):
    import os

    env = dict(os.environ, MSPROBE_NATIVE_STATS="1")  # what loading does when the kernels are asked for
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)


def test_a_build_that_does_not_load_is_reported_and_the_framework_path_serves():
    done = _run(_BROKEN_BUILD)
    assert done.returncode == 0, done.stderr
    assert "kernel True" in done.stdout
    assert "built but do not load" in done.stdout + done.stderr
    assert "Py_NewRef" in done.stdout + done.stderr


_OLD_BUILD = """
import sys, types
import msprobe._native._stats as built

old = types.ModuleType("msprobe._native._stats")
old.__dict__.update({k: v for k, v in vars(built).items() if k != "VERSION"})
old.VERSION = built.VERSION - 1
sys.modules["msprobe._native._stats"] = old
import msprobe.core.dump.native as native
print("kernel", native.float_stats is None)
"""


def test_a_build_of_another_version_is_reported_and_not_used():
    done = _run(_OLD_BUILD)
    assert done.returncode == 0, done.stderr
    assert "kernel True" in done.stdout
    assert "of another version" in done.stdout + done.stderr


def test_switched_off_nothing_is_loaded():
    import os

    env = dict(os.environ, MSPROBE_NATIVE_STATS="0")
    code = "import sys, msprobe.core.dump.native as n; print(n.float_stats is None, 'msprobe._native._stats' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert done.stdout.split() == ["True", "False"], done.stderr


def test_the_built_kernel_loads_without_a_warning():
    done = _run("import msprobe.core.dump.native as native; print('kernel', native.float_stats is not None)")
    assert done.returncode == 0, done.stderr
    assert "kernel True" in done.stdout
    assert "does not load" not in done.stdout + done.stderr
