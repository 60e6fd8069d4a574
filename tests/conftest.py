"""Shared pytest fixtures."""
import os
import sys

import pytest

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")


@pytest.fixture(autouse=True)
def _dropout_patch_does_not_leak():
    """seed_all(rm_dropout=True) makes torch's functional dropouts use p=0 for the rest of the process, as a
    user's script wants; a test that calls it (the README example does) must not change what the dropouts of
    later tests draw (the RNG audit test then saw 3 distinct generator states for 7 random calls)."""
    yield
    seed = sys.modules.get("msprobe.pytorch.seed")
    if seed is not None and seed._original_dropouts:
        seed.restore_dropout()


@pytest.fixture
def fixtures_dir():
    return FIXTURES


@pytest.fixture
def monitor_output(tmp_path, monkeypatch):
    """The monitor's output root in the test's tmp_path, dynamic mode off."""
    monkeypatch.setenv("MONITOR_OUTPUT_DIR", str(tmp_path / "monitor_output"))
    monkeypatch.delenv("DYNAMIC_MONITOR", raising=False)
    return tmp_path / "monitor_output"


@pytest.fixture(scope="session")
def ms():
    from ms_runtime import mindspore_on_cpu

    return mindspore_on_cpu()


@pytest.fixture
def portable_and_simd_rows():
    """Runs `script` (Python that prints JSON {'simd': bool, 'rows': [...]}) once with the portable C loops
    (MSPROBE_NATIVE_SIMD=0) and once with the AVX2 ones; returns the pairs of rows (portable, simd)."""
    import json
    import subprocess
    import sys

    def run(script: str) -> list:
        results = {}
        for flag in ("0", "1"):
            env = dict(os.environ, MSPROBE_NATIVE_SIMD=flag)
            out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
            results[flag] = json.loads(out.stdout)
        assert results["0"]["simd"] is False
        return list(zip(results["0"]["rows"], results["1"]["rows"]))
    return run
